// Backends behind one lifecycle, registered by name (Triton's tritonbackend.h):
// a backend turns a loaded model version into execution instances (or, for
// ensembles, its own scheduler); finalize releases everything.
import type { ModelConfig } from './model-config.ts';
import type { Datatype } from './datatypes.ts';
import type { ExecutionInstance, Scheduler, StatsSink } from './scheduler.ts';
import type { InferRequest, InferResponse } from './infer-request.ts';
import { unsupported } from './status.ts';

/** Input/output metadata a backend reads from the model file itself. */
export interface IOInfo {
  name: string;
  datatype: Datatype;
  shape: number[];
}

export interface BackendContext {
  modelName: string;
  version: number;
  /** <repo>/<model> */
  modelDir: string;
  /** <repo>/<model>/<version> */
  versionDir: string;
  config: ModelConfig;
  /** Run a request on another model of this engine through its own scheduler (ensembles). */
  infer: (request: InferRequest) => Promise<InferResponse>;
  /** Normalized configs of the engine's other loaded models (ensembles). */
  lookupConfig: (name: string, version: number) => ModelConfig | undefined;
  /** Engine-wide backend settings by backend name (Triton's --backend-config=<backend>,<key>=<value>). */
  backendConfig?: Record<string, Record<string, string>>;
  /** --model-memory-budget in bytes, when set (the python backend's default stub memory limit). */
  memoryBudgetBytes?: number;
  /** Load, unload and readiness of other models (Triton's pb_utils.load_model / unload_model / is_model_ready). */
  modelControl?: ModelControl;
}

/** What a model may ask of the engine's model control (ServerApi's own methods): the repository API's rules apply. Throws StatusError. */
export interface ModelControl {
  loadModel(name: string, params?: { config?: string; files?: Record<string, Uint8Array> }): Promise<void>;
  unloadModel(name: string, opts?: { unloadDependents?: boolean }): Promise<void>;
  isModelReady(name: string, version?: string): boolean;
}

export interface BackendModel {
  /** Execution instances, for the instance pool / dynamic batcher. */
  readonly instances: readonly ExecutionInstance[];
  /** A backend that schedules its own requests (ensembles) returns its scheduler here. */
  createScheduler?(stats: StatsSink): Scheduler;
  /** The model file's own input/output metadata, for config auto-complete and checks. */
  readonly io?: { inputs: IOInfo[]; outputs: IOInfo[] };
  /** Approximate resident bytes (statistics memory_usage). */
  memoryBytes?(): number;
  /** Resident bytes the model holds in processes of its own (Python stubs: their RSS), read now; the memory budget charges them. */
  externalMemoryBytes?(): number;
  /** Start one more execution instance (adaptive instance counts); backends that cannot omit it. */
  addInstance?(): Promise<ExecutionInstance>;
  /** Stop an instance addInstance (or load) made; it is idle and out of the pool. */
  removeInstance?(instance: ExecutionInstance): Promise<void>;
  /** A region was unregistered: drop any mapping of its key (worker-side caches). */
  forgetShm?(key: string): void;
  /** The model's own readiness check (a python model's is_ready()), asked on each ModelReady. */
  isReady?(): Promise<boolean>;
  finalize(): Promise<void>;
}

export interface Backend {
  readonly name: string;
  /** The model file name when the config gives none. */
  readonly defaultModelFilename: string | string[];
  load(ctx: BackendContext): Promise<BackendModel>;
  /**
   * The model file's own inputs and outputs, read without loading the model:
   * the backend's hook for config auto-complete and the checks against the
   * model at load (engine/config/model-config-loader.ts calls it). Backends
   * that cannot read their file omit it.
   */
  readModelIO?(modelFile: string): { inputs: IOInfo[]; outputs: IOInfo[] };
}

const registry = new Map<string, Backend>();

/** Register a backend under its name (the config's `backend`). */
export function registerBackend(b: Backend): void {
  registry.set(b.name, b);
}

/** The backend registered under `name`, if any. */
export function registeredBackend(name: string): Backend | undefined {
  return registry.get(name);
}

/** The backend serving a normalized config. */
export function backendFor(config: ModelConfig): Backend {
  const key = config.platform === 'ensemble' ? 'ensemble' : (config.backend ?? '');
  const b = registry.get(key);
  if (!b) {
    throw unsupported(
      `model '${config.name}': unknown backend '${key || config.platform}' (available: ${[...registry.keys()].join(', ')})`,
    );
  }
  return b;
}
