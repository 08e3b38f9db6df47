// A typed, promise-based client for inference.GRPCInferenceService (KServe v2 /
// Triton protocol), built from the project's protocol definitions. Messages
// are plain objects with proto field names (snake_case); int64 are numbers;
// bytes are Buffers. Used by the gateway, tests and benchmarks; it works
// against this project's engine and against a real Triton server.
//
// Ownership: one instance owns one grpc-js channel (and, with directInfer,
// one HTTP/2 session for ModelInfer); close() releases them.
// Calls may run concurrently from any number of callers.
import * as grpc from '@grpc/grpc-js';
import { inferenceService, GRPC_OPTIONS } from '../protocol/index.ts';
import { DirectUnaryChannel } from '../net/h2/grpc-direct-unary.ts';
import { LocalInferChannel, type LocalChannelOptions } from '../net/local/local-infer-channel.ts';
import type { ModelInferRequest, ModelInferResponse, ModelStreamInferResponse } from '../protocol/kserve-messages.ts';
import type {
  CudaRegionStatus,
  InferenceRpcs,
  LogSettingValue,
  ModelIndex,
  ModelMetadataResponse,
  ModelStatistics,
  RegionStatus,
  RepositoryParameter,
  ServerMetadataResponse,
  TraceSettingValues,
  UnaryRpc,
} from '../protocol/kserve-rpcs.ts';

export type {
  InferParameter,
  Parameters,
  InferTensorContents,
  InferInputTensor,
  InferRequestedOutputTensor,
  ModelInferRequest,
  InferOutputTensor,
  ModelInferResponse,
  ModelStreamInferResponse,
} from '../protocol/kserve-messages.ts';
export type {
  TensorMetadata,
  ModelMetadataResponse,
  ServerMetadataResponse,
  ModelIndex,
  RegionStatus,
  CudaRegionStatus,
  RepositoryParameter,
  LogSettingValue,
} from '../protocol/kserve-rpcs.ts';

/** Per-call options: a deadline in ms and request metadata (headers). */
export interface CallOptions {
  timeoutMs?: number;
  metadata?: Record<string, string>;
}

export interface GrpcClientOptions {
  /** Extra channel options (merged over GRPC_OPTIONS). */
  channelOptions?: grpc.ChannelOptions;
  /** Credentials; insecure by default. */
  credentials?: grpc.ChannelCredentials;
  /** Default per-call deadline in ms (none by default). */
  defaultTimeoutMs?: number;
  /**
   * Make ModelInfer calls straight on node:http2 instead of through grpc-js
   * (grpc-direct-unary.ts: same wire calls, about half the client CPU per
   * call). Insecure host:port and unix:/path targets only; ignored for
   * others and when `credentials` are given.
   */
  directInfer?: boolean;
  /**
   * Metadata sent with every call, under any per-call metadata: e.g. the
   * header of Triton's --grpc-restricted-protocol (`triton-grpc-protocol-<key>`).
   */
  metadata?: Record<string, string>;
  /**
   * A colocated engine's `--local-socket` path: ModelInfer goes over the
   * local channel (local-infer-channel.ts) while it is open, over gRPC
   * otherwise. The client's `metadata` is sent in its handshake.
   */
  localSocket?: string;
  /** The local channel's retry delay and log (local-infer-channel.ts). */
  localChannel?: Omit<LocalChannelOptions, 'metadata'>;
}

const ServiceClient = grpc.makeClientConstructor(inferenceService(), 'GRPCInferenceService');
const INFER = inferenceService().ModelInfer!;

type Unary = (
  req: object,
  md: grpc.Metadata,
  opts: grpc.CallOptions,
  cb: (err: grpc.ServiceError | null, res?: object) => void,
) => grpc.ClientUnaryCall;

const decodeInferResponse = (b: Buffer) => INFER.responseDeserialize(b) as ModelInferResponse;

/** True when `md` holds nothing but a traceparent the local channel's u16 field can carry (UTF-8: at most 3 bytes a char). */
function onlyTraceparent(md: Record<string, string> | undefined): boolean {
  if (md) for (const k in md) if (k !== 'traceparent' || md[k]!.length > 0x5555) return false;
  return true;
}

/** Promise-based client for one engine address (`host:port`). */
export class TritonGrpcClient {
  readonly address: string;
  private readonly raw: grpc.Client;
  private readonly defaultTimeoutMs: number | undefined;
  private readonly direct: DirectUnaryChannel | undefined;
  private readonly metadata: Record<string, string> | undefined;
  /** The local channel, when a socket path was given. */
  readonly local: LocalInferChannel | undefined;

  constructor(address: string, opts: GrpcClientOptions = {}) {
    this.address = address;
    this.metadata = opts.metadata && Object.keys(opts.metadata).length ? { ...opts.metadata } : undefined;
    this.defaultTimeoutMs = opts.defaultTimeoutMs;
    if (opts.directInfer && !opts.credentials && DirectUnaryChannel.accepts(address)) this.direct = new DirectUnaryChannel(address);
    if (opts.localSocket) this.local = new LocalInferChannel(opts.localSocket, { ...opts.localChannel, metadata: this.metadata });
    this.raw = new ServiceClient(address, opts.credentials ?? grpc.credentials.createInsecure(), {
      ...GRPC_OPTIONS,
      ...opts.channelOptions,
    });
  }

  /** The underlying grpc-js client (for channel state and waitForReady). */
  get grpcClient(): grpc.Client {
    return this.raw;
  }

  /** The client's metadata under the call's own (the call's win). */
  private metadataOf(o: CallOptions | undefined): Record<string, string> | undefined {
    return this.metadata ? { ...this.metadata, ...o?.metadata } : o?.metadata;
  }

  private unary<M extends UnaryRpc>(method: M, req: InferenceRpcs[M]['req'], opts: CallOptions = {}): Promise<InferenceRpcs[M]['res']> {
    const md = new grpc.Metadata();
    for (const [k, v] of Object.entries(this.metadataOf(opts) ?? {})) md.set(k, v);
    const timeoutMs = opts.timeoutMs ?? this.defaultTimeoutMs;
    const callOpts: grpc.CallOptions = timeoutMs ? { deadline: Date.now() + timeoutMs } : {};
    const fn = (this.raw as unknown as Record<string, Unary>)[method]!;
    return new Promise((resolve, reject) => {
      fn.call(this.raw, req, md, callOpts, (err, res) => (err ? reject(err) : resolve(res as InferenceRpcs[M]['res'])));
    });
  }

  serverLive(o?: CallOptions): Promise<{ live: boolean }> {
    return this.unary('ServerLive', {}, o);
  }
  serverReady(o?: CallOptions): Promise<{ ready: boolean }> {
    return this.unary('ServerReady', {}, o);
  }
  modelReady(name: string, version = '', o?: CallOptions): Promise<{ ready: boolean }> {
    return this.unary('ModelReady', { name, version }, o);
  }
  serverMetadata(o?: CallOptions): Promise<ServerMetadataResponse> {
    return this.unary('ServerMetadata', {}, o);
  }
  modelMetadata(name: string, version = '', o?: CallOptions): Promise<ModelMetadataResponse> {
    return this.unary('ModelMetadata', { name, version }, o);
  }
  modelInfer(req: ModelInferRequest, o?: CallOptions): Promise<ModelInferResponse> {
    const local = this.local;
    if (!this.direct && !local) return this.unary('ModelInfer', req, o);
    const timeoutMs = o?.timeoutMs ?? this.defaultTimeoutMs;
    const bytes = INFER.requestSerialize(req);
    // The local channel carries a traceparent but no other per-call metadata: a call with some goes over gRPC.
    if (local && onlyTraceparent(o?.metadata) && local.usable(bytes.length)) {
      return local.call(bytes, timeoutMs, o?.metadata?.traceparent).then(decodeInferResponse);
    }
    if (!this.direct) return this.unary('ModelInfer', req, o);
    return this.direct.call(INFER.path, bytes, { timeoutMs, metadata: this.metadataOf(o) }).then(decodeInferResponse);
  }
  /** The model's configuration as a plain object (model_config.proto field names). */
  modelConfig(name: string, version = '', o?: CallOptions): Promise<{ config: Record<string, unknown> }> {
    // A decoded ModelConfig is a plain object (protocol/kserve-rpcs.ts leaves its fields open).
    return this.unary('ModelConfig', { name, version }, o) as Promise<{ config: Record<string, unknown> }>;
  }
  modelStatistics(name = '', version = '', o?: CallOptions): Promise<{ model_stats: ModelStatistics[] }> {
    return this.unary('ModelStatistics', { name, version }, o);
  }
  async repositoryIndex(ready = false, repositoryName = '', o?: CallOptions): Promise<ModelIndex[]> {
    const r = await this.unary('RepositoryIndex', { repository_name: repositoryName, ready }, o);
    return r.models ?? [];
  }
  async repositoryModelLoad(modelName: string, parameters: Record<string, RepositoryParameter> = {}, o?: CallOptions): Promise<void> {
    await this.unary('RepositoryModelLoad', { repository_name: '', model_name: modelName, parameters }, o);
  }
  async repositoryModelUnload(modelName: string, parameters: Record<string, RepositoryParameter> = {}, o?: CallOptions): Promise<void> {
    await this.unary('RepositoryModelUnload', { repository_name: '', model_name: modelName, parameters }, o);
  }
  /** Registered system shm regions (all, or the one named), keyed by name. */
  async systemSharedMemoryStatus(name = '', o?: CallOptions): Promise<Record<string, RegionStatus>> {
    const r = await this.unary('SystemSharedMemoryStatus', { name }, o);
    return r.regions ?? {};
  }
  async systemSharedMemoryRegister(name: string, key: string, byteSize: number, offset = 0, o?: CallOptions): Promise<void> {
    await this.unary('SystemSharedMemoryRegister', { name, key, offset, byte_size: byteSize }, o);
  }
  /** Unregister one region by name; an empty name unregisters ALL regions. */
  async systemSharedMemoryUnregister(name: string, o?: CallOptions): Promise<void> {
    await this.unary('SystemSharedMemoryUnregister', { name }, o);
  }
  async cudaSharedMemoryStatus(name = '', o?: CallOptions): Promise<Record<string, CudaRegionStatus>> {
    const r = await this.unary('CudaSharedMemoryStatus', { name }, o);
    return r.regions ?? {};
  }
  async cudaSharedMemoryRegister(name: string, rawHandle: Uint8Array, deviceId: number, byteSize: number, o?: CallOptions): Promise<void> {
    await this.unary('CudaSharedMemoryRegister', { name, raw_handle: rawHandle, device_id: deviceId, byte_size: byteSize }, o);
  }
  async cudaSharedMemoryUnregister(name: string, o?: CallOptions): Promise<void> {
    await this.unary('CudaSharedMemoryUnregister', { name }, o);
  }
  async traceSetting(settings: TraceSettingValues = {}, modelName = '', o?: CallOptions): Promise<TraceSettingValues> {
    const r = await this.unary('TraceSetting', { settings, model_name: modelName }, o);
    return r.settings ?? {};
  }
  async logSettings(settings: Record<string, LogSettingValue> = {}, o?: CallOptions): Promise<Record<string, LogSettingValue>> {
    const r = await this.unary('LogSettings', { settings }, o);
    return r.settings ?? {};
  }

  /**
   * A bidirectional ModelStreamInfer call: write requests, read responses
   * (each carries error_message or infer_response); end() closes the sending side.
   */
  modelStreamInfer(o: CallOptions = {}): grpc.ClientDuplexStream<ModelInferRequest, ModelStreamInferResponse> {
    const md = new grpc.Metadata();
    for (const [k, v] of Object.entries(this.metadataOf(o) ?? {})) md.set(k, v);
    const timeoutMs = o.timeoutMs ?? this.defaultTimeoutMs;
    const fn = (this.raw as unknown as Record<string, (md: grpc.Metadata, opts: grpc.CallOptions) => unknown>).ModelStreamInfer!;
    return fn.call(this.raw, md, timeoutMs ? { deadline: Date.now() + timeoutMs } : {}) as grpc.ClientDuplexStream<
      ModelInferRequest,
      ModelStreamInferResponse
    >;
  }

  /** Resolve once the channel is connected, or reject after timeoutMs. */
  waitForReady(timeoutMs: number): Promise<void> {
    return new Promise((resolve, reject) => this.raw.waitForReady(Date.now() + timeoutMs, (err) => (err ? reject(err) : resolve())));
  }

  /** Close the channel; calls in flight fail with CANCELLED. */
  close(): void {
    this.local?.close();
    this.raw.close();
    this.direct?.close();
  }
}

/** True when err is a gRPC error (grpc-js's or the direct path's) carrying the given status code. */
export function isGrpcStatus(err: unknown, code: number): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === code;
}

export { GrpcStatus } from '../protocol/grpc-status.ts';
