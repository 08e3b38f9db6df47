// One loaded model version and its lifecycle (Triton's model_lifecycle):
// the state is private to the version and moves only through setState(),
// checked against MODEL_TRANSITIONS (common/lifecycle.ts).
import type { ModelConfig } from '../api/model-config.ts';
import type { BackendModel } from '../api/backend.ts';
import type { Scheduler } from '../api/scheduler.ts';
import type { ModelStatistics } from '../api/model-statistics.ts';
import type { ModelState } from '../api/server-api.ts';
import type { InstancePool } from '../scheduling/instance-pool.ts';
import type { ModelVersion as LoadedVersion } from '../api/model-version.ts';
import { Lifecycle, type TransitionTable } from '../../common/lifecycle.ts';
import { log } from '../../common/logger.ts';

/** The allowed moves of a model version's state. */
export const MODEL_TRANSITIONS: TransitionTable<ModelState> = {
  UNKNOWN: ['LOADING'],
  LOADING: ['READY', 'UNAVAILABLE'],
  READY: ['UNLOADING'],
  UNLOADING: ['UNAVAILABLE'],
  UNAVAILABLE: ['LOADING'],
};

/** A model's own state (reported while no version is loaded): never loaded, serving, or not. */
export type EntryState = Extract<ModelState, 'UNKNOWN' | 'READY' | 'UNAVAILABLE'>;

/** The allowed moves of a model's own state: a reload stays READY, a failed one stays UNAVAILABLE. */
export const ENTRY_TRANSITIONS: TransitionTable<EntryState> = {
  UNKNOWN: ['READY', 'UNAVAILABLE'],
  READY: ['READY', 'UNAVAILABLE'],
  UNAVAILABLE: ['READY', 'UNAVAILABLE'],
};

/** A model's own state and reason, private to it; moves only through ready() and unavailable(). */
export class ModelEntryStatus {
  readonly #life: Lifecycle<EntryState>;
  #reason = '';

  constructor(name: string) {
    this.#life = new Lifecycle(ENTRY_TRANSITIONS, 'UNKNOWN', `model '${name}'`);
  }

  get state(): EntryState {
    return this.#life.state;
  }

  /** Why the model is not READY ('' when it is or was never loaded). */
  get reason(): string {
    return this.#reason;
  }

  ready(): void {
    this.#life.to('READY');
    this.#reason = '';
  }

  unavailable(reason: string): void {
    this.#life.to('UNAVAILABLE');
    this.#reason = reason;
  }
}

/** A model version that loaded: its config, backend model, scheduler and statistics (what other wings see of it: engine/api/model-version.ts). */
export class ModelVersion implements LoadedVersion {
  /** Run once the backend is finalized (e.g. leave the rate limiter). */
  readonly onUnloaded: Array<() => void> = [];
  /** The instance pool its scheduler draws from (absent for ensembles): adaptive instance counts grow and shrink it. */
  pool?: InstancePool;
  /** Fingerprint of the files and config it was loaded from (version-fingerprint.ts), when the engine has a response cache. */
  identity?: string;
  /** How long its backend took to start its instances, and its warmup (the memory budget reports them). */
  loadTimings?: { backendNs: number; warmupNs: number };
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

  /**
   * Stop taking requests, let in-flight ones finish for at most `graceMs`
   * (Triton's --exit-timeout-secs), release the backend. Past the grace the
   * backend is finalized anyway: a python stub still executing is killed, and
   * the requests it held or that still wait fail with an error saying so.
   */
  async unload(graceMs = Number.POSITIVE_INFINITY): Promise<void> {
    if (this.state === 'READY') this.setState('UNLOADING');
    if (!(await settlesWithin(this.scheduler.stop(), graceMs))) {
      log.warn(
        `model '${this.name}' version ${this.version}: ${this.scheduler.inflightCount()} request(s) still in flight ` +
          `after the exit timeout (${graceMs / 1000} s); stopping its instances, those requests fail`,
      );
    }
    await this.backend.finalize();
    for (const fn of this.onUnloaded.splice(0)) fn();
    if (this.state === 'UNLOADING') this.setState('UNAVAILABLE', 'unloaded');
  }
}

/** Whether `p` settles within `ms` (Infinity: waits for it). */
async function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  if (ms === Number.POSITIVE_INFINITY) {
    await p;
    return true;
  }
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => (timer = setTimeout(resolve, Math.max(0, ms), false)));
  try {
    return await Promise.race([p.then(() => true), late]);
  } finally {
    clearTimeout(timer);
  }
}
