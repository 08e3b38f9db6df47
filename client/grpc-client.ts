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
import { DirectUnaryChannel } from './grpc-direct-unary.ts';

export type InferParameter =
  | { bool_param: boolean }
  | { int64_param: number }
  | { string_param: string }
  | { double_param: number }
  | { uint64_param: number };
export type Parameters = Record<string, InferParameter>;

export interface InferTensorContents {
  bool_contents?: boolean[];
  int_contents?: number[];
  int64_contents?: number[];
  uint_contents?: number[];
  uint64_contents?: number[];
  fp32_contents?: number[];
  fp64_contents?: number[];
  bytes_contents?: Uint8Array[];
}
export interface InferInputTensor {
  name: string;
  datatype: string;
  shape: number[];
  parameters?: Parameters;
  contents?: InferTensorContents;
}
export interface InferRequestedOutputTensor {
  name: string;
  parameters?: Parameters;
}
export interface ModelInferRequest {
  model_name: string;
  model_version?: string;
  id?: string;
  parameters?: Parameters;
  inputs: InferInputTensor[];
  outputs?: InferRequestedOutputTensor[];
  raw_input_contents?: Uint8Array[];
}
export interface InferOutputTensor {
  name: string;
  datatype: string;
  shape: number[];
  parameters?: Parameters;
  contents?: InferTensorContents;
}
export interface ModelInferResponse {
  model_name: string;
  model_version: string;
  id: string;
  parameters?: Parameters;
  outputs: InferOutputTensor[];
  raw_output_contents: Buffer[];
}
export interface ModelStreamInferResponse {
  error_message: string;
  infer_response?: ModelInferResponse;
}
export interface TensorMetadata {
  name: string;
  datatype: string;
  shape: number[];
}
export interface ModelMetadataResponse {
  name: string;
  versions: string[];
  platform: string;
  inputs: TensorMetadata[];
  outputs: TensorMetadata[];
}
export interface ServerMetadataResponse {
  name: string;
  version: string;
  extensions: string[];
}
export interface ModelIndex {
  name: string;
  version: string;
  state: string;
  reason: string;
}
export interface RegionStatus {
  name: string;
  key: string;
  offset: number;
  byte_size: number;
}
export interface CudaRegionStatus {
  name: string;
  device_id: number;
  byte_size: number;
}
export type RepositoryParameter =
  | { bool_param: boolean }
  | { int64_param: number }
  | { string_param: string }
  | { bytes_param: Uint8Array };
type SettingValues = Record<string, { value: string[] }>;
type LogSettingValue = { bool_param: boolean } | { uint32_param: number } | { string_param: string };

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
}

const ServiceClient = grpc.makeClientConstructor(inferenceService(), 'GRPCInferenceService');
const INFER = inferenceService().ModelInfer!;

type Unary = (
  req: object,
  md: grpc.Metadata,
  opts: grpc.CallOptions,
  cb: (err: grpc.ServiceError | null, res?: object) => void,
) => grpc.ClientUnaryCall;

/** Promise-based client for one engine address (`host:port`). */
export class TritonGrpcClient {
  readonly address: string;
  private readonly raw: grpc.Client;
  private readonly defaultTimeoutMs: number | undefined;
  private readonly direct: DirectUnaryChannel | undefined;
  private readonly metadata: Record<string, string> | undefined;

  constructor(address: string, opts: GrpcClientOptions = {}) {
    this.address = address;
    this.metadata = opts.metadata && Object.keys(opts.metadata).length ? { ...opts.metadata } : undefined;
    this.defaultTimeoutMs = opts.defaultTimeoutMs;
    if (opts.directInfer && !opts.credentials && DirectUnaryChannel.accepts(address)) this.direct = new DirectUnaryChannel(address);
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

  private unary<T>(method: string, req: object, opts: CallOptions = {}): Promise<T> {
    const md = new grpc.Metadata();
    for (const [k, v] of Object.entries(this.metadataOf(opts) ?? {})) md.set(k, v);
    const timeoutMs = opts.timeoutMs ?? this.defaultTimeoutMs;
    const callOpts: grpc.CallOptions = timeoutMs ? { deadline: Date.now() + timeoutMs } : {};
    const fn = (this.raw as unknown as Record<string, Unary>)[method]!;
    return new Promise<T>((resolve, reject) => {
      fn.call(this.raw, req, md, callOpts, (err, res) => (err ? reject(err) : resolve(res as T)));
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
    if (!this.direct) return this.unary('ModelInfer', req, o);
    const timeoutMs = o?.timeoutMs ?? this.defaultTimeoutMs;
    return this.direct
      .call(INFER.path, INFER.requestSerialize(req), { timeoutMs, metadata: this.metadataOf(o) })
      .then((b) => INFER.responseDeserialize(b) as ModelInferResponse);
  }
  /** The model's configuration as a plain object (model_config.proto field names). */
  modelConfig(name: string, version = '', o?: CallOptions): Promise<{ config: Record<string, unknown> }> {
    return this.unary('ModelConfig', { name, version }, o);
  }
  modelStatistics(name = '', version = '', o?: CallOptions): Promise<{ model_stats: Record<string, unknown>[] }> {
    return this.unary('ModelStatistics', { name, version }, o);
  }
  async repositoryIndex(ready = false, repositoryName = '', o?: CallOptions): Promise<ModelIndex[]> {
    const r = await this.unary<{ models?: ModelIndex[] }>('RepositoryIndex', { repository_name: repositoryName, ready }, o);
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
    const r = await this.unary<{ regions?: Record<string, RegionStatus> }>('SystemSharedMemoryStatus', { name }, o);
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
    const r = await this.unary<{ regions?: Record<string, CudaRegionStatus> }>('CudaSharedMemoryStatus', { name }, o);
    return r.regions ?? {};
  }
  async cudaSharedMemoryRegister(name: string, rawHandle: Uint8Array, deviceId: number, byteSize: number, o?: CallOptions): Promise<void> {
    await this.unary('CudaSharedMemoryRegister', { name, raw_handle: rawHandle, device_id: deviceId, byte_size: byteSize }, o);
  }
  async cudaSharedMemoryUnregister(name: string, o?: CallOptions): Promise<void> {
    await this.unary('CudaSharedMemoryUnregister', { name }, o);
  }
  async traceSetting(settings: SettingValues = {}, modelName = '', o?: CallOptions): Promise<SettingValues> {
    const r = await this.unary<{ settings?: SettingValues }>('TraceSetting', { settings, model_name: modelName }, o);
    return r.settings ?? {};
  }
  async logSettings(settings: Record<string, LogSettingValue> = {}, o?: CallOptions): Promise<Record<string, LogSettingValue>> {
    const r = await this.unary<{ settings?: Record<string, LogSettingValue> }>('LogSettings', { settings }, o);
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
    return new Promise((resolve, reject) =>
      this.raw.waitForReady(Date.now() + timeoutMs, (err) => (err ? reject(err) : resolve())),
    );
  }

  /** Close the channel; calls in flight fail with CANCELLED. */
  close(): void {
    this.raw.close();
    this.direct?.close();
  }
}

/** True when err is a grpc-js error carrying the given status code. */
export function isGrpcStatus(err: unknown, code: grpc.status): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === code;
}

export { status as GrpcStatus } from '@grpc/grpc-js';
