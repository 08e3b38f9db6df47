// One loaded model version as the wings beside the repository see it (the
// sharing tools, the request pipeline): its config, backend model, scheduler,
// statistics and state. The repository's ModelVersion
// (engine/repository/model-lifecycle.ts) implements it and alone moves its
// state; a type here keeps `sharing/` from importing `repository/`, which
// imports it.
import type { ModelConfig } from './model-config.ts';
import type { BackendModel } from './backend.ts';
import type { ExecutionInstance, Scheduler } from './scheduler.ts';
import type { ModelStatistics } from './model-statistics.ts';
import type { ModelState } from './server-api.ts';

/** The part of an instance pool adaptive instance counts grow and shrink (engine/scheduling/instance-pool.ts). */
export interface ResizablePool {
  readonly instances: readonly ExecutionInstance[];
  /** Put a new instance into service. */
  add(instance: ExecutionInstance): void;
  /** Take an instance out once it is idle; resolves with it. */
  retire(): Promise<ExecutionInstance>;
}

/** A model version that loaded. */
export interface ModelVersion {
  readonly name: string;
  readonly version: number;
  readonly config: ModelConfig;
  readonly backend: BackendModel;
  readonly scheduler: Scheduler;
  readonly stats: ModelStatistics;
  /** Its lifecycle state; only the repository moves it. */
  readonly state: ModelState;
  /** Why it is not READY ('' when it is). */
  readonly reason: string;
  /** The instance pool its scheduler draws from (absent for ensembles). */
  readonly pool?: ResizablePool;
  /** Fingerprint of the files and config it was loaded from, when the engine has a response cache. */
  readonly identity?: string;
  /** How long its backend took to start its instances, and its warmup. */
  readonly loadTimings?: { backendNs: number; warmupNs: number };
}
