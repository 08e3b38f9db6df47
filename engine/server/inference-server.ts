// over 300 lines: past 300 only since the formatter wrapped its long lines (issue 38); to be split
// The engine's ServerApi (Triton's TRITONSERVER_Server), a thin facade: owns
// the repository manager, the shared-memory manager and the sharing parts,
// answers the metadata, repository, shm, trace and log APIs, and hands each
// request to the pipeline (infer-pipeline.ts) under its deadline. All on the
// main thread; models run on their instances.
import type { LoadParameters, ModelIndexEntry, ModelMetadata, ModelStatistics, ServerApi, ShmRegionStatus } from '../api/server-api.ts';
import type { InferRequest, InferResponse } from '../api/infer-request.ts';
import type { ModelConfig } from '../api/model-config.ts';
import type { FailureReason } from '../api/scheduler.ts';
import { ModelRepositoryManager } from '../repository/model-repository-manager.ts';
import type { InferenceServerOptions } from './inference-server-options.ts';
import { SharedMemoryManager } from '../shm/shared-memory-manager.ts';
import { fullShape } from './infer-validation.ts';
import { fromConfigType } from '../api/datatypes.ts';
import { failedLoad, notFound, unavailable, unsupported } from '../api/status.ts';
import { answerByDeadline } from './request-deadline.ts';
import { InferPipeline } from './infer-pipeline.ts';
import { LogSettings } from './log-settings.ts';
import { checkRepositoryReadable } from '../repository/model-repository-manager.ts';
import { registerBuiltinBackends } from '../backends/index.ts';
import { TraceManager } from '../tracing/trace-manager.ts';
import { CacheManager } from '../sharing/cache-manager.ts';
import { createResponseCache } from '../sharing/response-cache.ts';
import type { SharingStatus } from '../api/sharing-status.ts';
import { RateLimiter } from '../sharing/rate-limiter.ts';
import { MemoryBudget } from '../sharing/model-memory-budget.ts';
import { InstanceAutoscaler } from '../sharing/instance-autoscaler.ts';
import { MemoryRelease } from '../sharing/memory-release.ts';

export type { InferenceServerOptions } from './inference-server-options.ts';

export const SERVER_NAME = 'triton';
export const SERVER_VERSION = '0.1.0';

export class InferenceServer implements ServerApi {
  readonly name: string;
  readonly version = SERVER_VERSION;
  readonly extensions = [
    'classification',
    'model_repository',
    'model_repository(unload_dependents)',
    'schedule_policy',
    'model_configuration',
    'system_shared_memory',
    'cuda_shared_memory',
    'binary_tensor_data',
    'parameters',
    'statistics',
    'trace',
    'logging',
    'generate',
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
  /** The rate limiter, when --rate-limit=execution_count. */
  readonly rateLimiter: RateLimiter | undefined;
  /** The memory budget, when --model-memory-budget gave one. */
  readonly budget: MemoryBudget | undefined;
  /** Adaptive instance counts, when --adaptive-instances. */
  readonly autoscaler: InstanceAutoscaler | undefined;
  /** Every request's steps, shm inputs to shm outputs. */
  private readonly pipeline: InferPipeline;

  constructor(private readonly opts: InferenceServerOptions) {
    registerBuiltinBackends();
    this.name = opts.serverName || SERVER_NAME;
    this.tracing = new TraceManager(opts.traceConfig, undefined, { traceDir: opts.traceDir });
    this.logging = new LogSettings({ logFile: opts.logFile, logDir: opts.logDir });
    this.rateLimiter = opts.rateLimit === 'execution_count' ? new RateLimiter(opts.rateLimitResources) : undefined;
    this.budget = opts.modelMemoryBudget ? new MemoryBudget(opts.modelMemoryBudget, opts.pinnedModels) : undefined;
    this.autoscaler = opts.adaptiveInstances
      ? new InstanceAutoscaler({
          versions: () => this.repository.allVersions(),
          budget: this.budget,
          rateLimiter: this.rateLimiter,
          windowMs: opts.adaptiveWindowMs,
          policy: opts.adaptivePolicy,
        })
      : undefined;
    this.cache = opts.cacheConfig
      ? new CacheManager(createResponseCache(opts.cacheConfig), (n, v) => this.repository.readyVersion(n, v))
      : undefined;
    this.shm = new SharedMemoryManager({ keyPrefix: opts.shmKeyPrefix, maxRegions: opts.shmMaxRegions, maxTotalBytes: opts.shmMaxBytes });
    // A region leaves the table at unregister, or at its last release when in use then: workers drop their mappings of its key.
    this.shm.onRemoved = (key) => {
      if (!this.shm.status().some((r) => r.key === key)) this.forgetInBackends([key]);
    };
    this.repository = new ModelRepositoryManager({
      repository: opts.modelRepository,
      controlMode: opts.controlMode ?? 'none',
      startupModels: opts.loadModels ?? [],
      strict: opts.strictModelConfig ?? false,
      pollSecs: opts.repositoryPollSecs ?? 15,
      shm: this.shm,
      infer: (r) => this.inferValidated(r),
      modelControl: this,
      backendConfig: opts.backendConfig,
      rateLimiter: this.rateLimiter,
      budget: this.budget,
      instanceLimits: opts.instanceLimits,
      onDemandTimeoutMs: opts.onDemandTimeoutMs,
      memoryMonitorMs: opts.memoryMonitorMs,
      exitTimeoutMs: (opts.exitTimeoutSecs ?? 30) * 1000,
      fingerprintVersions: opts.cacheConfig !== undefined,
    });
    this.pipeline = new InferPipeline({
      repository: this.repository,
      shm: this.shm,
      tracing: this.tracing,
      cache: this.cache,
      budget: this.budget,
      memoryRelease: this.memoryRelease,
      modelRepository: opts.modelRepository,
      controlMode: opts.controlMode,
      onDemandTimeoutMs: opts.onDemandTimeoutMs ?? 30_000,
      forgetInBackends: (keys) => this.forgetInBackends(keys),
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
      versions: this.repository
        .allVersions()
        .filter((v) => v.name === name && v.state === 'READY')
        .map((v) => String(v.version)),
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

  failureReasons(): Array<{ name: string; version: string; reasons: Record<FailureReason, number> }> {
    return this.repository.allVersions().map((v) => ({ name: v.stats.name, version: v.stats.version, reasons: v.stats.failureReasons() }));
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
  infer(req: InferRequest): Promise<InferResponse> {
    if (this.stopping) return Promise.reject(unavailable('server is shutting down'));
    req.arrivalNs ??= process.hrtime.bigint();
    req.clientSignal ??= req.signal;
    // Without a timeout the pipeline's own promise is the answer (no wrapper frame, no closures per request).
    if (!req.timeoutUs) return this.pipeline.run(req);
    try {
      return answerByDeadline(
        req,
        () => this.pipeline.run(req),
        () => this.repository.readyVersion(req.modelName, Number(req.modelVersion) || undefined)?.config,
      );
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** A request from inside the engine (ensemble steps, BLS): the pipeline from its on-demand step on. */
  inferValidated(req: InferRequest): Promise<InferResponse> {
    return this.pipeline.runOnModel(req);
  }

  sharingStatus(): SharingStatus {
    return {
      cache: this.cache ? { kind: this.cache.store.kind, ...this.cache.store.stats() } : undefined,
      budget: this.budget?.status(),
    };
  }

  /**
   * Client registration and unregistration need --allow-client-shm=true, as
   * in Triton: with it off, both are refused (status still answers).
   */
  private checkClientShm(): void {
    if (!this.opts.allowClientShm) {
      throw unsupported(`Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable.`);
    }
  }

  shmRegister(name: string, key: string, offset: number, byteSize: number): void {
    this.checkClientShm();
    this.shm.register(name, key, offset, byteSize);
  }

  /** Unregister one region or all ('' ); one in use by a request stays listed until that request ends (as in Triton). */
  shmUnregister(name: string, who?: string): void {
    this.checkClientShm();
    this.shm.unregister(name, who);
  }

  /** Tell every backend to drop its worker mappings of these shm keys. */
  private forgetInBackends(keys: string[]): void {
    for (const key of keys) for (const v of this.repository.allVersions()) v.backend.forgetShm?.(key);
  }

  shmStatus(name?: string): ShmRegionStatus[] {
    return this.shm.status(name);
  }

  cudaShmRegister(name: string): void {
    this.checkClientShm();
    throw unsupported(`CUDA shared memory region '${name}' cannot be registered: this engine was built without CUDA shared-memory support`);
  }

  cudaShmUnregister(_name: string): void {
    this.checkClientShm();
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
