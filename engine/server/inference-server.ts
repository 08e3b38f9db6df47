// over 300 lines: the facade still holds the request pipeline; issue 22 moves that pipeline to infer-pipeline.ts
// The engine's ServerApi (Triton's TRITONSERVER_Server): owns the repository
// manager and the shared-memory manager, checks requests, resolves shm
// tensors, routes each request to its model's scheduler and writes shm
// outputs. All on the main thread; models run on their instances.
import path from 'node:path';
import type {
  LoadParameters, ModelIndexEntry, ModelMetadata, ModelStatistics, ServerApi, ShmRegionStatus,
} from '../api/server-api.ts';
import type { InferRequest, InferResponse } from '../api/infer-request.ts';
import type { ModelConfig } from '../api/model-config.ts';
import { ModelRepositoryManager, type ControlMode } from '../repository/model-repository-manager.ts';
import { SharedMemoryManager, type ShmAcquired } from '../shm/shared-memory-manager.ts';
import { validateRequest, fullShape } from './infer-validation.ts';
import { classify } from './classification.ts';
import { fromConfigType } from '../api/datatypes.ts';
import { cancelled, failedLoad, invalidArg, notFound, unavailable, unsupported } from '../api/status.ts';
import { answerByDeadline } from './request-deadline.ts';
import { checkedResponse, checkStreamedResponses } from './response-check.ts';
import { isDecoupled } from '../api/decoupled.ts';
import { LogSettings } from './log-settings.ts';
import { checkRepositoryReadable } from '../repository/model-repository-manager.ts';
import { registerBuiltinBackends } from '../backends/index.ts';
import { TraceManager, type TraceSettings } from '../tracing/trace-manager.ts';
import { CacheManager, modelCacheable, requestCacheable } from '../sharing/cache-manager.ts';
import { createResponseCache, type CacheConfig } from '../sharing/response-cache.ts';
import type { ModelVersion } from '../repository/model-lifecycle.ts';
import type { SharingStatus } from '../api/sharing-status.ts';
import { RateLimiter } from '../sharing/rate-limiter.ts';
import type { ResourceFlag } from '../sharing/rate-limiter-decision.ts';
import { MemoryBudget } from '../sharing/model-memory-budget.ts';
import { readyOnDemand } from '../sharing/on-demand-loading.ts';
import { InstanceAutoscaler } from '../sharing/instance-autoscaler.ts';
import type { InstancePolicy } from '../sharing/instance-count-decision.ts';
import { MemoryRelease } from '../sharing/memory-release.ts';

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
  /** --pin-model: never evicted for the budget. */
  pinnedModels?: string[];
  /** On-demand mode: how long a request waits for its model's load (default 30 s). */
  onDemandTimeoutMs?: number;
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

export const SERVER_NAME = 'triton';
export const SERVER_VERSION = '0.1.0';

export class InferenceServer implements ServerApi {
  readonly name: string;
  readonly version = SERVER_VERSION;
  readonly extensions = [
    'classification', 'model_repository', 'model_repository(unload_dependents)', 'schedule_policy',
    'model_configuration', 'system_shared_memory', 'cuda_shared_memory', 'binary_tensor_data',
    'parameters', 'statistics', 'trace', 'logging',
  ];
  readonly shm: SharedMemoryManager;
  readonly repository: ModelRepositoryManager;
  private live = false;
  private stopping = false;
  private shmSweep: NodeJS.Timeout | undefined;
  /** Gives memory back after very large inline requests (memory-release.ts). */
  readonly memoryRelease = new MemoryRelease();
  private readonly logging: LogSettings;
  readonly tracing: TraceManager;

  /** The response cache, when --cache-config gave one. */
  readonly cache: CacheManager | undefined;
  private readonly cacheable = new WeakMap<ModelVersion, boolean>();
  /** The rate limiter, when --rate-limit=execution_count. */
  readonly rateLimiter: RateLimiter | undefined;
  /** The memory budget, when --model-memory-budget gave one. */
  readonly budget: MemoryBudget | undefined;
  /** Adaptive instance counts, when --adaptive-instances. */
  readonly autoscaler: InstanceAutoscaler | undefined;

  constructor(private readonly opts: InferenceServerOptions) {
    registerBuiltinBackends();
    this.name = opts.serverName || SERVER_NAME;
    this.tracing = new TraceManager(opts.traceConfig, undefined, { traceDir: opts.traceDir });
    this.logging = new LogSettings({ logFile: opts.logFile, logDir: opts.logDir });
    this.rateLimiter = opts.rateLimit === 'execution_count' ? new RateLimiter(opts.rateLimitResources) : undefined;
    this.budget = opts.modelMemoryBudget ? new MemoryBudget(opts.modelMemoryBudget, opts.pinnedModels) : undefined;
    this.autoscaler = opts.adaptiveInstances
      ? new InstanceAutoscaler({ versions: () => this.repository.allVersions(), budget: this.budget, rateLimiter: this.rateLimiter, windowMs: opts.adaptiveWindowMs, policy: opts.adaptivePolicy })
      : undefined;
    this.cache = opts.cacheConfig ? new CacheManager(createResponseCache(opts.cacheConfig), (n, v) => this.repository.readyVersion(n, v)) : undefined;
    this.shm = new SharedMemoryManager({ keyPrefix: opts.shmKeyPrefix, maxRegions: opts.shmMaxRegions, maxTotalBytes: opts.shmMaxBytes });
    this.repository = new ModelRepositoryManager({
      repository: opts.modelRepository,
      controlMode: opts.controlMode ?? 'none',
      startupModels: opts.loadModels ?? [],
      strict: opts.strictModelConfig ?? false,
      pollSecs: opts.repositoryPollSecs ?? 15,
      shm: this.shm,
      infer: (r) => this.inferValidated(r),
      backendConfig: opts.backendConfig,
      rateLimiter: this.rateLimiter,
      budget: this.budget,
      onDemandTimeoutMs: opts.onDemandTimeoutMs,
      exitTimeoutMs: (opts.exitTimeoutSecs ?? 30) * 1000,
      fingerprintVersions: opts.cacheConfig !== undefined,
    });
  }

  async start(): Promise<void> {
    checkRepositoryReadable(this.opts.modelRepository, this.opts.exitOnError ?? true);
    this.live = true;
    const every = this.opts.shmSweepMs ?? 10_000;
    if (every > 0) {
      this.shmSweep = setInterval(() => this.forgetInBackends(this.shm.sweepVanished()), every);
      this.shmSweep.unref();
    }
    await this.repository.start();
    this.autoscaler?.start();
  }

  /** Stop taking requests, drain, unload every model, unmap regions. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.autoscaler?.stop();
    clearInterval(this.shmSweep);
    this.memoryRelease.stop();
    await this.repository.stop();
    this.shm.close();
    await this.tracing.shutdown();
    await this.cache?.close();
    this.live = false;
  }

  isLive(): boolean {
    return this.live;
  }

  isReady(): boolean {
    if (!this.live || this.stopping) return false;
    return this.opts.strictReadiness === false || this.repository.allReady();
  }

  isModelReady(name: string, version?: string): boolean {
    try {
      return this.repository.get(name, version).state === 'READY';
    } catch {
      // get() throws NOT_FOUND for an unknown model or version: that model is not ready.
      return false;
    }
  }

  async probeModelReady(name: string, version?: string): Promise<boolean> {
    if (!this.isModelReady(name, version)) return false;
    const backend = this.repository.get(name, version).backend;
    return backend?.isReady ? backend.isReady() : true;
  }

  modelMetadata(name: string, version?: string): ModelMetadata {
    const mv = this.repository.get(name, version);
    const c = mv.config;
    const meta = (t: ModelConfig['input'][number]) => ({ name: t.name, datatype: fromConfigType(t.data_type), shape: fullShape(c, t) });
    return {
      name,
      versions: this.repository.allVersions().filter((v) => v.name === name && v.state === 'READY').map((v) => String(v.version)),
      platform: c.platform || c.backend || '',
      inputs: c.input.map(meta),
      outputs: c.output.map(meta),
    };
  }

  modelConfig(name: string, version?: string): ModelConfig {
    return this.repository.get(name, version).config;
  }

  modelStatistics(name?: string, version?: string): ModelStatistics[] {
    if (name) {
      if (version) return [this.repository.get(name, version).stats.snapshot()];
      const vs = this.repository.allVersions().filter((v) => v.name === name);
      if (!vs.length) this.repository.get(name);
      return vs.map((v) => v.stats.snapshot());
    }
    return this.repository.allVersions().map((v) => v.stats.snapshot());
  }

  repositoryIndex(readyOnly: boolean): ModelIndexEntry[] {
    return this.repository.index(readyOnly);
  }

  /** Load/unload RPCs work in every control mode but 'none' (Triton's message kept). */
  private checkLoadUnloadAllowed(): void {
    if (this.opts.controlMode === 'none' || this.opts.controlMode === undefined) {
      throw unavailable(`explicit model load / unload is not allowed if polling is enabled or model control mode is 'none'`);
    }
  }

  async loadModel(name: string, params?: LoadParameters): Promise<void> {
    this.checkLoadUnloadAllowed();
    await this.repository.load(name, params).catch((err: unknown) => {
      throw failedLoad(name, err);
    });
  }

  async unloadModel(name: string, opts?: { unloadDependents?: boolean }): Promise<void> {
    this.checkLoadUnloadAllowed();
    await this.repository.unload(name, opts);
  }

  /** A client request, answered by its deadline (request-deadline.ts). */
  async infer(req: InferRequest): Promise<InferResponse> {
    if (this.stopping) throw unavailable('server is shutting down');
    req.arrivalNs ??= process.hrtime.bigint();
    return answerByDeadline(req, () => this.inferHeld(req), () => this.repository.readyVersion(req.modelName, Number(req.modelVersion) || undefined)?.config);
  }

  /** Resolve shm inputs, run, write shm outputs, release (the regions stay held until the execution ends). */
  private async inferHeld(req: InferRequest): Promise<InferResponse> {
    const held: ShmAcquired[] = [];
    let inlineBytes = 0;
    for (const t of req.inputs) inlineBytes += t.data.byteLength;
    try {
      for (const t of req.inputs) {
        if (!t.shm) continue;
        if (t.data.byteLength) throw invalidArg(`input '${t.name}' has both shared memory parameters and data`);
        const a = this.shm.acquire(t.shm, { tensor: t.name, kind: 'input' });
        held.push(a);
        t.data = a.bytes;
        t.shmLocation = { key: a.key, offset: a.absoluteOffset, byteSize: t.shm.byteSize, regionOffset: a.regionOffset, regionSize: a.regionSize, fd: a.fd };
        t.shmCheck = a.check;
      }
      const res = await this.inferValidated(req);
      // An input region truncated while the request waited or ran reads as zeros
      // (the SIGBUS guard's page): never answer from it.
      for (const a of held) {
        const problem = a.check();
        if (problem) throw problem;
      }
      // Abandoned (deadline passed, client gone): its outputs go nowhere, least of all into a client's region.
      if (req.signal?.aborted) throw cancelled(`request for model '${req.modelName}' was cancelled`);
      this.applyClassification(req, res);
      this.writeShmOutputs(req, res);
      return res;
    } finally {
      this.memoryRelease.note(inlineBytes);
      for (const a of held) a.release();
      // A worker may have mapped a region again after its unregister's forget
      // (this request was still queued then): drop those mappings now.
      if (held.some((a) => a.unregistered)) {
        const live = new Set(this.shm.status().map((r) => r.key));
        this.forgetInBackends([...new Set(held.map((a) => a.key))].filter((k) => !live.has(k)));
      }
    }
  }

  /** Check against the model's config and enqueue on its scheduler (also used by ensemble steps). */
  async inferValidated(req: InferRequest): Promise<InferResponse> {
    req.arrivalNs ??= process.hrtime.bigint();
    const mv = this.opts.controlMode === 'on-demand' ? await readyOnDemand(this.repository, req, this.opts.onDemandTimeoutMs ?? 30_000) : this.repository.get(req.modelName, req.modelVersion);
    // In use from here to the answer: the budget never evicts it meanwhile (no await between get and begin).
    this.budget?.begin(req.modelName);
    try {
      return await this.inferOn(mv, req);
    } finally {
      this.budget?.end(req.modelName);
    }
  }

  private async inferOn(mv: ModelVersion, req: InferRequest): Promise<InferResponse> {
    if (req.unaryOnly !== undefined && isDecoupled(mv.config)) throw unsupported(req.unaryOnly);
    try {
      validateRequest(mv.config, req);
    } catch (err) {
      mv.stats.failed(Number(process.hrtime.bigint() - req.arrivalNs!));
      throw err;
    }
    // What the model answers is checked against its config before it is cached or sent (response-check.ts).
    checkStreamedResponses(mv.config, req);
    const run = () => mv.scheduler.enqueue(req).then((r) => checkedResponse(mv.config, req, r));
    const res = await this.tracing.traced(req, String(mv.version), () => (this.usesCache(mv, req) ? this.cache!.serve(mv, req, run) : run()));
    // Outputs in the order asked for, else the config's order.
    if (req.outputs.length > 1) {
      const order = new Map(req.outputs.map((o, i) => [o.name, i]));
      res.outputs.sort((a, b) => (order.get(a.name) ?? 0) - (order.get(b.name) ?? 0));
    }
    return res;
  }

  private usesCache(mv: ModelVersion, req: InferRequest): boolean {
    if (!this.cache || !requestCacheable(req)) return false;
    let ok = this.cacheable.get(mv);
    if (ok === undefined) this.cacheable.set(mv, (ok = modelCacheable(mv.config, (n, v) => this.repository.readyVersion(n, v)?.config)));
    return ok;
  }

  sharingStatus(): SharingStatus {
    return {
      cache: this.cache ? { kind: this.cache.store.kind, ...this.cache.store.stats() } : undefined,
      budget: this.budget?.status(),
    };
  }

  /** Outputs asked for with `classification: k` become their top-k as BYTES. */
  private applyClassification(req: InferRequest, res: InferResponse): void {
    if (!req.outputs.some((o) => o.classification)) return;
    const mv = this.repository.get(res.modelName, res.modelVersion);
    for (const o of req.outputs) {
      if (!o.classification) continue;
      const i = res.outputs.findIndex((t) => t.name === o.name);
      if (i >= 0) res.outputs[i] = classify(res.outputs[i]!, o.classification, mv.config, path.join(this.opts.modelRepository, res.modelName));
    }
  }

  private writeShmOutputs(req: InferRequest, res: InferResponse): void {
    for (const o of req.outputs) {
      if (!o.shm) continue;
      const out = res.outputs.find((t) => t.name === o.name);
      if (!out || out.shm) continue;
      if (out.data.byteLength > o.shm.byteSize) {
        throw invalidArg(
          `shared memory size specified with the request for output '${o.name}' should be at least ${out.data.byteLength} bytes to hold the results`,
        );
      }
      const a = this.shm.acquire({ ...o.shm, byteSize: out.data.byteLength }, { tensor: o.name, kind: 'output' });
      try {
        a.bytes.set(out.data);
        // Truncated during the copy: the bytes went to the guard's page, not to the client.
        const problem = a.check();
        if (problem) throw problem;
      } finally {
        a.release();
      }
      out.shm = { ...o.shm, byteSize: out.data.byteLength };
      out.data = new Uint8Array(0);
    }
  }

  shmRegister(name: string, key: string, offset: number, byteSize: number): void {
    if (!this.opts.allowClientShm) {
      throw unsupported(`system shared memory is disabled on this server (start it with --allow-client-shm=true)`);
    }
    this.shm.register(name, key, offset, byteSize);
  }

  shmUnregister(name: string, who?: string): void {
    const keys = name ? this.shm.status().filter((r) => r.name === name).map((r) => r.key) : this.shm.status().map((r) => r.key);
    this.shm.unregister(name, who);
    this.forgetInBackends(keys);
  }

  /** Tell every backend to drop its worker mappings of these shm keys. */
  private forgetInBackends(keys: string[]): void {
    for (const key of keys) for (const v of this.repository.allVersions()) v.backend.forgetShm?.(key);
  }

  shmStatus(name?: string): ShmRegionStatus[] {
    return this.shm.status(name);
  }

  cudaShmRegister(name: string): void {
    throw unsupported(
      `CUDA shared memory region '${name}' cannot be registered: this engine was built without CUDA shared-memory support`,
    );
  }

  cudaShmUnregister(_name: string): void {
    // Nothing is ever registered without CUDA; unknown names succeed, as in Triton.
  }

  cudaShmStatus(name?: string): Array<{ name: string; device_id: number; byte_size: number }> {
    if (name) throw notFound(`Unable to find cuda shared memory region: '${name}'`);
    return [];
  }

  logSettings(update?: Record<string, boolean | number | string>): Record<string, boolean | number | string> {
    return this.logging.update(update);
  }

  traceSettings(model: string | undefined, update?: Record<string, string[]>): Record<string, string[]> {
    if (model) this.repository.get(model);
    return update ? this.tracing.update(model, update) : this.tracing.settings(model);
  }

}

