// One loaded model version and its lifecycle (Triton's model_lifecycle):
// state moves only through transition(), which rejects illegal moves.
import type { ModelConfig } from './model-config.ts';
import type { BackendModel } from './backend.ts';
import type { Scheduler } from './scheduler.ts';
import type { ModelStatistics } from './model-statistics.ts';
import type { ModelState } from './server-api.ts';
import { internal } from './status.ts';
import type { InstancePool } from './instance-pool.ts';

const LEGAL: Record<ModelState, ModelState[]> = {
  UNKNOWN: ['LOADING'],
  LOADING: ['READY', 'UNAVAILABLE'],
  READY: ['UNLOADING'],
  UNLOADING: ['UNAVAILABLE'],
  UNAVAILABLE: ['LOADING'],
};

/** Check a lifecycle move; throws INTERNAL naming "from X to Y" when illegal. */
export function transition(from: ModelState, to: ModelState, what: string): ModelState {
  if (!LEGAL[from].includes(to)) throw internal(`${what}: illegal state change from ${from} to ${to}`);
  return to;
}

/** A model version that loaded: its config, backend model, scheduler and statistics. */
export class ModelVersion {
  state: ModelState = 'UNKNOWN';
  reason = '';
  /** Run once the backend is finalized (e.g. leave the rate limiter). */
  readonly onUnloaded: Array<() => void> = [];
  /** The instance pool its scheduler draws from (absent for ensembles): adaptive instance counts grow and shrink it. */
  pool?: InstancePool;

  constructor(
    readonly name: string,
    readonly version: number,
    readonly config: ModelConfig,
    readonly backend: BackendModel,
    readonly scheduler: Scheduler,
    readonly stats: ModelStatistics,
  ) {}

  setState(to: ModelState, reason = ''): void {
    this.state = transition(this.state, to, `model '${this.name}' version ${this.version}`);
    this.reason = reason;
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
