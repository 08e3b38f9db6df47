// The engine's one facade, shared by the gRPC and HTTP frontends (Triton's
// TRITONSERVER_Server API). Frontends translate wire <-> these calls only.
import type { SharingStatus } from './sharing-status.ts';
import type { FailureReason } from './scheduler.ts';
import type { InferRequest, InferResponse } from './infer-request.ts';
import type { ModelConfig } from './model-config.ts';
import type { Datatype } from './datatypes.ts';

export interface TensorMetadata {
  name: string;
  datatype: Datatype;
  /** -1 for variable dims; includes the batch dim (-1) when max_batch_size > 0. */
  shape: number[];
}

export interface ModelMetadata {
  name: string;
  versions: string[];
  platform: string;
  inputs: TensorMetadata[];
  outputs: TensorMetadata[];
}

export type ModelState = 'UNKNOWN' | 'LOADING' | 'READY' | 'UNLOADING' | 'UNAVAILABLE';

export interface ModelIndexEntry {
  name: string;
  version: string;
  state: ModelState;
  reason: string;
  /** Bytes charged against --model-memory-budget now (ours; only with a budget). */
  resident_bytes?: number;
  /** Of those, what was charged when its load and warmup finished (the rest: growth seen while it ran). */
  load_bytes?: number;
  /** Budgeted loads of the model after it was not resident, their total time, and evictions: it caused, it suffered. */
  cold_loads?: number;
  cold_load_ms_total?: number;
  /** The last of those loads. */
  last_cold_load_ms?: number;
  /** Of that: waiting for room (evictions included), the backend starting its instances, warmup. */
  cold_load_room_ms_total?: number;
  cold_load_backend_ms_total?: number;
  cold_load_warmup_ms_total?: number;
  evictions_caused?: number;
  evicted?: number;
}

export interface Duration {
  count: number;
  ns: number;
}

export interface ModelStatistics {
  name: string;
  version: string;
  last_inference: number; // ms since epoch
  inference_count: number;
  execution_count: number;
  inference_stats: {
    success: Duration;
    fail: Duration;
    queue: Duration;
    compute_input: Duration;
    compute_infer: Duration;
    compute_output: Duration;
    cache_hit: Duration;
    cache_miss: Duration;
    /** Ours (Triton counts these only in its failure metric): requests their client abandoned. */
    cancel?: Duration;
  };
  batch_stats: Array<{ batch_size: number; compute_input: Duration; compute_infer: Duration; compute_output: Duration }>;
  memory_usage: Array<{ type: string; id: number; byte_size: number }>;
}

export interface ShmRegionStatus {
  name: string;
  key: string;
  offset: number;
  byte_size: number;
}

export interface LoadParameters {
  /** JSON ModelConfig overriding the repository's config.pbtxt (Triton's "config"). */
  config?: string;
  /** "file:<version>/<name>" -> contents (Triton's file override). */
  files?: Record<string, Uint8Array>;
}

/** Everything a frontend may ask of the engine. Throws StatusError. */
export interface ServerApi {
  readonly name: string;
  readonly version: string;
  readonly extensions: string[];
  isLive(): boolean;
  isReady(): boolean;
  isModelReady(name: string, version?: string): boolean;
  /** isModelReady, then the backend's own check (a python model's is_ready()): what ModelReady answers. */
  probeModelReady(name: string, version?: string): Promise<boolean>;
  modelMetadata(name: string, version?: string): ModelMetadata;
  modelConfig(name: string, version?: string): ModelConfig;
  modelStatistics(name?: string, version?: string): ModelStatistics[];
  repositoryIndex(readyOnly: boolean): ModelIndexEntry[];
  loadModel(name: string, params?: LoadParameters): Promise<void>;
  unloadModel(name: string, opts?: { unloadDependents?: boolean }): Promise<void>;
  infer(request: InferRequest): Promise<InferResponse>;

  shmRegister(name: string, key: string, offset: number, byteSize: number): void;
  shmUnregister(name: string, who?: string): void;
  shmStatus(name?: string): ShmRegionStatus[];
  cudaShmRegister(name: string, rawHandle: Uint8Array, deviceId: number, byteSize: number): void;
  cudaShmUnregister(name: string): void;
  cudaShmStatus(name?: string): Array<{ name: string; device_id: number; byte_size: number }>;

  logSettings(update?: Record<string, boolean | number | string>): Record<string, boolean | number | string>;
  traceSettings(model: string | undefined, update?: Record<string, string[]>): Record<string, string[]>;
  /** Response cache, memory budget and on-demand loading state (metrics). */
  sharingStatus?(): SharingStatus;
  /** Failed requests of every loaded model version by Triton's failure reason (metrics' `reason` label). */
  failureReasons?(): Array<{ name: string; version: string; reasons: Record<FailureReason, number> }>;
}
