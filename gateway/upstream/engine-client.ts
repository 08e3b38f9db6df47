// The only place the gateway talks to the engine. Wraps TritonGrpcClient:
// maps gRPC failures to catalog errors (504 deadline, 503 engine down, 400
// rejected input), caches model metadata, notices when the engine goes away
// and probes until it is back (then emits 'up' so the staging arena can
// register its regions again). Works against any KServe v2 gRPC server.
// With a local socket (a colocated engine's --local-socket), ModelInfer goes
// over the local channel while it is open (net/local/local-infer-channel.ts);
// its failures are gRPC-shaped and take the same translation.
//
// Ownership: owns one gRPC channel and the probe timer; close() ends both.
// Event loop only.
import { EventEmitter } from 'node:events';
import {
  TritonGrpcClient,
  GrpcStatus,
  isGrpcStatus,
  type ModelIndex,
  type ModelInferRequest,
  type ModelInferResponse,
  type ModelMetadataResponse,
  type ModelStreamInferResponse,
  type RegionStatus,
} from '../../client/grpc-client.ts';
import type { ClientDuplexStream } from '@grpc/grpc-js';
import { gatewayError, GatewayError } from '../core/errors.ts';
import { fetchModelLoads, type ModelLoads } from './engine-loads.ts';
import { engineKeyMetadata, engineKeyPairs } from './engine-key.ts';
import { gatewayLog as log, tracer } from '../../common/logger.ts';

const trace = tracer('engine');

export interface EngineClientOptions {
  /** How long metadata stays cached (ms). */
  metadataTtlMs?: number;
  /** Deadline of control calls: metadata, region (un)registration, probes (ms). */
  controlTimeoutMs?: number;
  /** Interval of the probe while the engine is down (ms). */
  probeIntervalMs?: number;
  /** `<key>=<value>[,...]` for a restricted engine (default: GATEWAY_ENGINE_KEY). */
  engineKey?: string;
  /**
   * The engine's `--local-socket` path (the gateway's transport option `engineLocalSocket`):
   * ModelInfer over the local channel while it is open, gRPC otherwise
   * (docs/engine/local-channel.md). Unset: gRPC only.
   */
  localSocket?: string;
  /** How long after a failed or dropped local channel it is tried again (ms, default 1000). */
  localRetryMs?: number;
  /** The engine's HTTP address (transport option `engineHttp`): where modelLoads() reads (engine-loads.ts). Unset: no such figures. */
  httpAddress?: string;
  /** ModelInfer over gRPC on node:http2 (net/h2/grpc-direct-unary.ts; default true); false: through grpc-js (transport option `engineGrpcDirect`). */
  grpcDirect?: boolean;
}

/** The engine as the gateway needs it (tests may substitute a fake). */
export interface EngineApi extends EventEmitter {
  readonly address: string;
  readonly up: boolean;
  /** `traceparent` (W3C) travels as gRPC metadata so the engine's spans join the call's trace. */
  infer(req: ModelInferRequest, fn: string, timeoutMs: number, traceparent?: string): Promise<ModelInferResponse>;
  modelMetadata(name: string, version?: string): Promise<ModelMetadataResponse>;
  /** The repository index: READY models only unless `readyOnly` is false. */
  listModels(readyOnly?: boolean): Promise<ModelIndex[]>;
  registerRegion(name: string, key: string, byteSize: number): Promise<void>;
  unregisterRegion(name: string): Promise<void>;
  regionStatus(): Promise<Record<string, RegionStatus>>;
  /** Probe now; true when the engine answers ServerReady with ready. */
  check(): Promise<boolean>;
  /** The model's configuration (model_config.proto field names). */
  modelConfig?(name: string, version?: string): Promise<Record<string, unknown>>;
  /** Cold loads and evictions per model, from the engine's HTTP index; undefined without its HTTP address. */
  modelLoads?(): Promise<ModelLoads[] | undefined>;
  /** A ModelStreamInfer call (streaming functions, stream-call.ts); failures are raw gRPC errors, see translateStreamError. */
  streamInfer?(timeoutMs: number, traceparent?: string): ClientDuplexStream<ModelInferRequest, ModelStreamInferResponse>;
  translateStreamError?(e: unknown, fn: string, timeoutMs: number, model: string): Promise<GatewayError>;
  close(): void;
}

export class EngineClient extends EventEmitter implements EngineApi {
  readonly address: string;
  private readonly client: TritonGrpcClient;
  private readonly metadataTtlMs: number;
  private readonly controlTimeoutMs: number;
  private readonly probeIntervalMs: number;
  private readonly metadata = new Map<string, { at: number; md: Promise<ModelMetadataResponse> }>();
  private readonly httpAddress: string | undefined;
  private readonly httpHeaders: Record<string, string>;
  private isUp = true;
  private probe: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(address: string, opts: EngineClientOptions = {}) {
    super();
    this.address = address;
    this.metadataTtlMs = opts.metadataTtlMs ?? 10_000;
    this.controlTimeoutMs = opts.controlTimeoutMs ?? 3000;
    this.probeIntervalMs = opts.probeIntervalMs ?? 250;
    this.httpAddress = opts.httpAddress;
    // The same pairs as plain HTTP headers (the form of Triton's --http-restricted-api).
    this.httpHeaders = engineKeyPairs(opts.engineKey ?? process.env.GATEWAY_ENGINE_KEY) ?? {};
    this.client = new TritonGrpcClient(address, {
      // Reconnect quickly after an engine restart (grpc-js backs off up to 120 s by default).
      channelOptions: {
        'grpc.initial_reconnect_backoff_ms': 100,
        'grpc.max_reconnect_backoff_ms': 1000,
        'grpc.keepalive_time_ms': 10_000,
      },
      // ModelInfer on node:http2 directly: half the client CPU of a grpc-js call
      // (net/h2/grpc-direct-unary.ts); the transport option engineGrpcDirect=false goes back to grpc-js.
      directInfer: opts.grpcDirect ?? true,
      // The key of the engine's restricted groups, on every call (never logged).
      metadata: engineKeyMetadata(opts.engineKey ?? process.env.GATEWAY_ENGINE_KEY),
      localSocket: opts.localSocket,
      localChannel: { retryMs: opts.localRetryMs, log: (m) => log.info(m) },
    });
  }

  /** ModelInfer calls sent over the local channel so far (0 without one). */
  get localCalls(): number {
    return this.client.local?.calls ?? 0;
  }

  modelLoads(): Promise<ModelLoads[] | undefined> {
    return this.httpAddress ? fetchModelLoads(this.httpAddress, this.httpHeaders, this.controlTimeoutMs) : Promise.resolve(undefined);
  }

  get up(): boolean {
    return this.isUp;
  }

  infer(req: ModelInferRequest, fn: string, timeoutMs: number, traceparent?: string): Promise<ModelInferResponse> {
    // No async wrapper on the hot path: one promise per call, failures translated.
    return this.client.modelInfer(req, traceparent ? { timeoutMs, metadata: { traceparent } } : { timeoutMs }).catch(async (e: unknown) => {
      throw await this.translate(e, fn, timeoutMs, req.model_name);
    });
  }

  streamInfer(timeoutMs: number, traceparent?: string): ClientDuplexStream<ModelInferRequest, ModelStreamInferResponse> {
    return this.client.modelStreamInfer(traceparent ? { timeoutMs, metadata: { traceparent } } : { timeoutMs });
  }

  /** Map a failed stream's gRPC error to a catalog error (as for unary calls). */
  translateStreamError(e: unknown, fn: string, timeoutMs: number, model: string): Promise<GatewayError> {
    return this.translate(e, fn, timeoutMs, model);
  }

  modelMetadata(name: string, version = ''): Promise<ModelMetadataResponse> {
    const k = `${name}\u0000${version}`;
    const hit = this.metadata.get(k);
    if (hit && Date.now() - hit.at < this.metadataTtlMs) return hit.md;
    const md = this.client.modelMetadata(name, version, { timeoutMs: this.controlTimeoutMs }).catch(async (e) => {
      this.metadata.delete(k);
      throw await this.translate(e, name, this.controlTimeoutMs);
    });
    this.metadata.set(k, { at: Date.now(), md });
    return md;
  }

  async listModels(readyOnly = true): Promise<ModelIndex[]> {
    try {
      return await this.client.repositoryIndex(readyOnly, '', { timeoutMs: this.controlTimeoutMs });
    } catch (e) {
      throw await this.translate(e, '', this.controlTimeoutMs);
    }
  }

  /** The model's configuration (model_config.proto field names), for the console. */
  async modelConfig(name: string, version = ''): Promise<Record<string, unknown>> {
    try {
      return (await this.client.modelConfig(name, version, { timeoutMs: this.controlTimeoutMs })).config;
    } catch (e) {
      throw await this.translate(e, name, this.controlTimeoutMs);
    }
  }

  /** Triton statistics rows (every model and version when name is empty), for the console. */
  async modelStatistics(name = '', version = ''): Promise<Array<Record<string, unknown>>> {
    try {
      return (await this.client.modelStatistics(name, version, { timeoutMs: this.controlTimeoutMs })).model_stats ?? [];
    } catch (e) {
      throw await this.translate(e, name, this.controlTimeoutMs);
    }
  }

  async registerRegion(name: string, key: string, byteSize: number): Promise<void> {
    try {
      await this.client.systemSharedMemoryRegister(name, key, byteSize, 0, { timeoutMs: this.controlTimeoutMs });
    } catch (e) {
      throw await this.translate(e, '', this.controlTimeoutMs);
    }
  }

  /** Unregister one region by name (never all); a region the engine does not know is fine. */
  async unregisterRegion(name: string): Promise<void> {
    if (!name) throw new Error('refusing to unregister with an empty name (that would unregister every region)');
    try {
      await this.client.systemSharedMemoryUnregister(name, { timeoutMs: this.controlTimeoutMs });
    } catch (e) {
      if (isGrpcStatus(e, GrpcStatus.NOT_FOUND) || isGrpcStatus(e, GrpcStatus.INVALID_ARGUMENT)) return;
      throw await this.translate(e, '', this.controlTimeoutMs);
    }
  }

  async regionStatus(): Promise<Record<string, RegionStatus>> {
    try {
      return await this.client.systemSharedMemoryStatus('', { timeoutMs: this.controlTimeoutMs });
    } catch (e) {
      throw await this.translate(e, '', this.controlTimeoutMs);
    }
  }

  async check(): Promise<boolean> {
    try {
      const r = await this.client.serverReady({ timeoutMs: Math.min(this.controlTimeoutMs, 1000) });
      if (!this.isUp) this.markUp();
      return r.ready;
    } catch (e) {
      if (isGrpcStatus(e, GrpcStatus.UNAVAILABLE) || isGrpcStatus(e, GrpcStatus.DEADLINE_EXCEEDED)) this.markDown(e);
      return false;
    }
  }

  close(): void {
    this.closed = true;
    if (this.probe) clearInterval(this.probe);
    this.probe = undefined;
    this.client.close();
  }

  /** Map a gRPC failure of a call for function `fn` to a catalog error. */
  private async translate(e: unknown, fn: string, timeoutMs: number, model = fn): Promise<GatewayError> {
    if (e instanceof GatewayError) return e;
    const details = (e as { details?: string }).details ?? (e as Error).message;
    if (isGrpcStatus(e, GrpcStatus.DEADLINE_EXCEEDED)) return gatewayError('ENGINE_TIMEOUT', { name: fn, timeoutMs }, e);
    if (isGrpcStatus(e, GrpcStatus.UNAVAILABLE) || isGrpcStatus(e, GrpcStatus.CANCELLED)) {
      // UNAVAILABLE is also how a server reports a model that is not ready: ask the server itself.
      if (this.isUp && !this.closed && (await this.live())) {
        return gatewayError('FUNCTION_UNAVAILABLE', { name: fn, model }, e);
      }
      this.markDown(e);
      return gatewayError('ENGINE_UNAVAILABLE', { address: this.address }, e);
    }
    if (isGrpcStatus(e, GrpcStatus.INVALID_ARGUMENT) || isGrpcStatus(e, GrpcStatus.OUT_OF_RANGE)) {
      return gatewayError('ENGINE_REJECTED', { name: fn, reason: details }, e);
    }
    if (isGrpcStatus(e, GrpcStatus.NOT_FOUND)) return gatewayError('FUNCTION_UNAVAILABLE', { name: fn, model }, e);
    log.error(`engine call for '${fn}' failed`, details);
    return gatewayError('ENGINE_ERROR', { name: fn }, e);
  }

  private async live(): Promise<boolean> {
    try {
      return (await this.client.serverLive({ timeoutMs: 500 })).live;
    } catch {
      // No answer to a liveness question is the answer: not live (the caller reports ENGINE_UNAVAILABLE).
      return false;
    }
  }

  private markDown(e: unknown): void {
    if (this.closed) return;
    if (this.isUp) {
      this.isUp = false;
      log.warn(`engine at ${this.address} is unavailable (${(e as Error).message}); probing until it is back`);
      this.emit('down');
    }
    if (!this.probe) {
      this.probe = setInterval(() => void this.check(), this.probeIntervalMs);
      this.probe.unref();
    }
  }

  private markUp(): void {
    this.isUp = true;
    this.metadata.clear();
    if (this.probe) clearInterval(this.probe);
    this.probe = undefined;
    log.info(`engine at ${this.address} is back`);
    trace('engine up: emitting up');
    this.emit('up');
  }
}
