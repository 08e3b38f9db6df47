// One loaded model version and its lifecycle (Triton's model_lifecycle):
// the state is private to the version and moves only through setState(),
// checked against MODEL_TRANSITIONS (common/lifecycle.ts).
import type { ModelConfig } from '../api/model-config.ts';
import type { BackendModel } from '../api/backend.ts';
import type { Scheduler } from '../api/scheduler.ts';
import type { ModelStatistics } from '../api/model-statistics.ts';
import type { ModelState } from '../api/server-api.ts';
import type { InstancePool } from '../scheduling/instance-pool.ts';
import { Lifecycle, type TransitionTable } from '../../common/lifecycle.ts';

/** The allowed moves of a model version's state. */
export const MODEL_TRANSITIONS: TransitionTable<ModelState> = {
  UNKNOWN: ['LOADING'],
  LOADING: ['READY', 'UNAVAILABLE'],
  READY: ['UNLOADING'],
  UNLOADING: ['UNAVAILABLE'],
  UNAVAILABLE: ['LOADING'],
};

/** A model version that loaded: its config, backend model, scheduler and statistics. */
export class ModelVersion {
  /** Run once the backend is finalized (e.g. leave the rate limiter). */
  readonly onUnloaded: Array<() => void> = [];
  /** The instance pool its scheduler draws from (absent for ensembles): adaptive instance counts grow and shrink it. */
  pool?: InstancePool;
  readonly #life: Lifecycle<ModelState>;
  #reason = '';

  constructor(
    readonly name: string,
    readonly version: number,
    readonly config: ModelConfig,
    readonly backend: BackendModel,
    readonly scheduler: Scheduler,
    readonly stats: ModelStatistics,
  ) {
    this.#life = new Lifecycle(MODEL_TRANSITIONS, 'UNKNOWN', `model '${name}' version ${version}`);
  }

  get state(): ModelState {
    return this.#life.state;
  }

  /** Why the version is not READY ('' when it is). */
  get reason(): string {
    return this.#reason;
  }

  setState(to: ModelState, reason = ''): void {
    this.#life.to(to);
    this.#reason = reason;
  }

  /** Stop taking requests, let in-flight ones finish, release the backend. */
  async unload(): Promise<void> {
    if (this.state === 'READY') this.setState('UNLOADING');
    await this.scheduler.stop();
    await this.backend.finalize();
    for (const fn of this.onUnloaded.splice(0)) fn();
    if (this.state === 'UNLOADING') this.setState('UNAVAILABLE', 'unloaded');
  }
}
