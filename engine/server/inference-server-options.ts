// The engine's start options (the CLI's flags, cli-options.ts, fill them).
import type { ControlMode } from '../repository/model-repository-manager.ts';
import type { TraceSettings } from '../tracing/trace-manager.ts';
import type { CacheConfig } from '../sharing/response-cache.ts';
import type { ResourceFlag } from '../sharing/rate-limiter-decision.ts';
import type { InstancePolicy } from '../sharing/instance-count-decision.ts';
import type { InstanceLimits } from '../repository/instance-limits.ts';

export interface InferenceServerOptions {
  modelRepository: string;
  controlMode?: ControlMode;
  loadModels?: string[];
  strictModelConfig?: boolean;
  repositoryPollSecs?: number;
  allowClientShm?: boolean;
  shmKeyPrefix?: string;
  shmMaxRegions?: number;
  shmMaxBytes?: number;
  /** Server ready only when every model is ready (Triton's --strict-readiness). */
  strictReadiness?: boolean;
  /** Per-backend settings (Triton's --backend-config=<backend>,<key>=<value>). */
  backendConfig?: Record<string, Record<string, string>>;
  /** Initial trace settings (--trace-config). */
  traceConfig?: TraceSettings;
  /** Server metadata `name` (Triton's clients and tools compare it to 'triton'). */
  serverName?: string;
  /** --cache-config: the response cache models with response_cache { enable: true } use. */
  cacheConfig?: CacheConfig;
  /** --rate-limit (Triton's default: off). */
  rateLimit?: 'off' | 'execution_count';
  /** --rate-limit-resource values. */
  rateLimitResources?: ResourceFlag[];
  /** --model-memory-budget in bytes (ours). */
  modelMemoryBudget?: number;
  /** --max-instances-per-model, --max-instances-total: instance counts refused at load beyond these (ours). */
  instanceLimits?: Partial<InstanceLimits>;
  /** --pin-model: never evicted for the budget. */
  pinnedModels?: string[];
  /** On-demand mode: how long a request waits for its model's load (default 30 s). */
  onDemandTimeoutMs?: number;
  /** How often the memory budget's monitor reads RSS (ms; default 500; tests). */
  memoryMonitorMs?: number;
  /** --adaptive-instances: models with max_instance_count gain and lose instances with their queue time (ours). */
  adaptiveInstances?: boolean;
  /** Observation window of adaptive instances (default 250 ms). */
  adaptiveWindowMs?: number;
  /** Overrides of the adaptive policy's thresholds (tests, benchmarks). */
  adaptivePolicy?: Partial<InstancePolicy>;
  /** How often regions whose shm object vanished are unregistered (ms; 0 = never). */
  shmSweepMs?: number;
  /** --trace-dir: trace_file given over the API must lie under it (none: refused, as Triton). */
  traceDir?: string;
  /** --log-dir: log_file given over the API must lie under it (none: refused, as Triton). */
  logDir?: string;
  /** --log-file: where the log goes from the start (Triton's). */
  logFile?: string;
  /** --exit-on-error (default true): an unreadable model repository fails the start. */
  exitOnError?: boolean;
  /** --exit-timeout-secs: how long an unload or the shutdown waits for in-flight requests (default 30). */
  exitTimeoutSecs?: number;
}
