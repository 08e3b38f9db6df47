// over 300 lines: past 300 only with the stream pacing option (issue 42); to be split when the transport options become one object
// The KServe v2 / Triton gRPC frontend: inference.GRPCInferenceService (all
// 20 RPCs) and grpc.health.v1.Health over the engine's ServerApi. Handlers
// check, translate, call the engine and reply; every failure leaves through
// replyError.
import * as grpc from '@grpc/grpc-js';
import type { ServerApi } from '../../api/server-api.ts';
import { GRPC_OPTIONS, healthService, inferenceService } from '../../../protocol/index.ts';
import type { ModelInferRequest, ModelInferResponse } from '../../../protocol/kserve-messages.ts';
import type {
  HealthCheckRpc,
  InferenceRpcs,
  LogSettingValue,
  RepositoryParameter,
  StreamInferRpc,
  UnaryRpc,
} from '../../../protocol/kserve-rpcs.ts';
import { capMessage, invalidArg, toStatusError } from '../../api/status.ts';
import { toInferRequest, toInferResponse } from './grpc-tensors.ts';
import { grpcFailure, modelInferCall } from './model-infer-call.ts';
import { directInferRoute } from './grpc-direct-infer.ts';
import { reachIntoGrpcJs } from './grpc-js-internals.ts';
import { startH2Front } from './grpc-h2-front.ts';
import { DEFAULT_ENGINE_TRANSPORT, type EngineTransport } from '../transport-options.ts';
import { RequestCancel } from '../../api/cancel-signal.ts';
import type { H2Limits } from '../../../net/h2/h2-limits.ts';
import { removeStaleSocket } from '../../../net/unix-socket.ts';
import { DEFAULT_STREAM_MAX_QUEUED_BYTES } from '../stream-queue-bound.ts';
import { modelStreamInfer } from './model-stream-infer.ts';
import type { StreamPacing } from './stream-response-pacer.ts';
import type { RestrictedFeatures } from '../restricted-api.ts';
import { restricted } from './grpc-restricted.ts';

/** The received message buffer of a ModelInferRequest (set by our deserializer), to give back to the receive pool. */
const RECEIVED = Symbol('received message buffer');
type ReceivedRequest = ModelInferRequest & { [RECEIVED]?: Buffer };

type Rpcs = InferenceRpcs<Uint8Array>;
type UnaryHandlers = { [M in UnaryRpc]: grpc.handleUnaryCall<Rpcs[M]['req'], Rpcs[M]['res']> };

function replyError<Res>(cb: grpc.sendUnaryData<Res>, err: unknown): void {
  cb(grpcFailure(err) as grpc.ServiceError, null);
}

function unary<Req, Res>(fn: (req: Req, call: grpc.ServerUnaryCall<Req, Res>) => Promise<Res> | Res): grpc.handleUnaryCall<Req, Res> {
  return (call, cb) => {
    Promise.resolve()
      .then(() => fn(call.request, call))
      .then(
        (res) => cb(null, res),
        (err) => replyError(cb, err),
      );
  };
}

/** The caller's W3C traceparent, when its metadata carries one. */
const traceparentOf = (md: grpc.Metadata): string | undefined => {
  const v = md.get('traceparent')[0];
  return v === undefined ? undefined : String(v);
};

/** The peer of a call, for logs of who asked for what. */
const peer = (call: { getPeer(): string }) => {
  try {
    return call.getPeer();
  } catch {
    // a call whose stream already closed has no peer: the log line says so
    return 'unknown';
  }
};

function repositoryParams(p: Record<string, RepositoryParameter> | undefined): {
  config?: string;
  files: Record<string, Uint8Array>;
  unloadDependents: boolean;
} {
  const files: Record<string, Uint8Array> = {};
  let config: string | undefined;
  let unloadDependents = false;
  for (const [k, m] of Object.entries(p ?? {})) {
    const choice = m.parameter_choice;
    if (k === 'config') config = String(m.string_param ?? '');
    else if (k.startsWith('file:')) {
      if (choice !== 'bytes_param') throw invalidArg(`load parameter '${k}' must be bytes`);
      files[k.slice(5)] = m.bytes_param ?? new Uint8Array(0);
    } else if (k === 'unload_dependents') unloadDependents = !!m.bool_param;
    else throw invalidArg(`unknown repository parameter '${k}'`);
  }
  return { config, files, unloadDependents };
}

/** LogSettings' SettingValue (a oneof) -> JS value. */
function logSettingValue(v: LogSettingValue): boolean | number | string {
  switch (v.parameter_choice) {
    case 'bool_param':
      return !!v.bool_param;
    case 'uint32_param':
      return Number(v.uint32_param);
    default:
      return v.string_param ?? '';
  }
}

const toLogSettingValue = (v: boolean | number | string): LogSettingValue =>
  typeof v === 'boolean' ? { bool_param: v } : typeof v === 'number' ? { uint32_param: v } : { string_param: String(v) };

function handlers(
  api: ServerApi,
  streamMaxQueuedBytes: number,
  streamPacing?: StreamPacing,
): UnaryHandlers & { ModelStreamInfer: grpc.handleBidiStreamingCall<StreamInferRpc['req'], StreamInferRpc['res']> } {
  return {
    ServerLive: unary(() => ({ live: api.isLive() })),
    ServerReady: unary(() => ({ ready: api.isReady() })),
    ModelReady: unary(async (r) => ({ ready: await api.probeModelReady(r.name, r.version || undefined) })),
    ServerMetadata: unary(() => ({ name: api.name, version: api.version, extensions: api.extensions })),
    ModelMetadata: unary((r) => api.modelMetadata(r.name, r.version || undefined)),
    ModelConfig: unary((r) => ({ config: api.modelConfig(r.name, r.version || undefined) })),
    ModelStatistics: unary((r) => ({ model_stats: api.modelStatistics(r.name || undefined, r.version || undefined) })),
    RepositoryIndex: unary((r) => ({ models: api.repositoryIndex(!!r.ready) })),
    RepositoryModelLoad: unary(async (r) => {
      const p = repositoryParams(r.parameters);
      await api.loadModel(r.model_name, { config: p.config, files: p.files });
      return {};
    }),
    RepositoryModelUnload: unary(async (r) => {
      const p = repositoryParams(r.parameters);
      await api.unloadModel(r.model_name, { unloadDependents: p.unloadDependents });
      return {};
    }),
    SystemSharedMemoryStatus: unary((r) => ({
      regions: Object.fromEntries(api.shmStatus(r.name || undefined).map((s) => [s.name, s])),
    })),
    SystemSharedMemoryRegister: unary((r) => {
      api.shmRegister(r.name, r.key, Number(r.offset), Number(r.byte_size));
      return {};
    }),
    SystemSharedMemoryUnregister: unary((r, call) => {
      api.shmUnregister(r.name, `gRPC ${peer(call)}`);
      return {};
    }),
    CudaSharedMemoryStatus: unary((r) => ({
      regions: Object.fromEntries(api.cudaShmStatus(r.name || undefined).map((s) => [s.name, s])),
    })),
    CudaSharedMemoryRegister: unary((r) => {
      api.cudaShmRegister(r.name, r.raw_handle, Number(r.device_id), Number(r.byte_size));
      return {};
    }),
    CudaSharedMemoryUnregister: unary((r) => {
      api.cudaShmUnregister(r.name);
      return {};
    }),
    TraceSetting: unary((r) => {
      const update: Record<string, string[]> = {};
      for (const [k, v] of Object.entries(r.settings ?? {})) update[k] = [...(v.value ?? [])];
      const s = api.traceSettings(r.model_name || undefined, Object.keys(update).length ? update : undefined);
      return { settings: Object.fromEntries(Object.entries(s).map(([k, v]) => [k, { value: v }])) };
    }),
    LogSettings: unary((r) => {
      const update: Record<string, boolean | number | string> = {};
      for (const [k, v] of Object.entries(r.settings ?? {})) update[k] = logSettingValue(v);
      const s = api.logSettings(Object.keys(update).length ? update : undefined);
      return { settings: Object.fromEntries(Object.entries(s).map(([k, v]) => [k, toLogSettingValue(v)])) };
    }),
    ModelInfer: (
      call: grpc.ServerUnaryCall<ModelInferRequest, ModelInferResponse<Uint8Array>>,
      cb: grpc.sendUnaryData<ModelInferResponse<Uint8Array>>,
    ) => {
      // grpc-js serializes synchronously inside cb, as modelInferCall needs.
      const received = (call.request as ReceivedRequest)[RECEIVED];
      let settled = false;
      // Not an AbortController: a cheaper signal the schedulers accept (cancel-signal.ts).
      const ac = new RequestCancel();
      // grpc-js reports every stream close as 'cancelled', also after the
      // reply; only a close before it is a cancellation.
      call.on('cancelled', () => settled || ac.abort());
      modelInferCall(api, call.request, received, traceparentOf(call.metadata), ac, (err, res) => {
        settled = true;
        if (res) cb(null, res);
        else replyError(cb, err);
      });
    },
    ModelStreamInfer: modelStreamInfer(api, streamMaxQueuedBytes, traceparentOf, streamPacing),
  };
}

/** The service with ModelInfer's deserializer noting the message buffer on the decoded request (see ModelInfer). */
function withReceivedBuffer(svc: grpc.ServiceDefinition): grpc.ServiceDefinition {
  const m = svc.ModelInfer!;
  const deserialize = m.requestDeserialize;
  return {
    ...svc,
    ModelInfer: {
      ...m,
      requestDeserialize: (b: Buffer) => {
        const msg = deserialize(b) as ReceivedRequest;
        msg[RECEIVED] = b;
        return msg;
      },
    },
  };
}

/**
 * Start the gRPC server; port 0 picks a free one. `unixSocket`: also listen
 * on that path (replacing a stale socket file left by a crashed engine), for
 * a colocated gateway: a call over a Unix socket skips the loopback TCP stack.
 */
export async function startGrpcServer(
  api: ServerApi,
  opts: {
    port: number;
    host?: string;
    unixSocket?: string;
    restricted?: RestrictedFeatures;
    streamMaxQueuedBytes?: number;
    h2Limits?: H2Limits;
    transport?: Partial<EngineTransport> /** transport-options.ts; defaults where not given */;
    /** --grpc-max-response-pool-size and TRITONSERVER_DELAY_GRPC_RESPONSE (stream-response-pacer.ts). */
    streamPacing?: StreamPacing;
  },
): Promise<{ port: number; close(): Promise<void> }> {
  const transport = { ...DEFAULT_ENGINE_TRANSPORT, ...opts.transport };
  const server = new grpc.Server({ ...GRPC_OPTIONS, 'grpc.enable_channelz': 0 });
  server.addService(
    withReceivedBuffer(inferenceService()),
    restricted(handlers(api, opts.streamMaxQueuedBytes ?? DEFAULT_STREAM_MAX_QUEUED_BYTES, opts.streamPacing), opts.restricted),
  );
  const health: { Check: grpc.handleUnaryCall<HealthCheckRpc['req'], HealthCheckRpc['res']> } = {
    Check: unary(() => ({ status: api.isReady() ? 'SERVING' : 'NOT_SERVING' })),
  };
  server.addService(healthService(), restricted(health, opts.restricted));
  const bind = (address: string) =>
    new Promise<number>((resolve, reject) =>
      server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
  const infer = inferenceService().ModelInfer!;
  const directOpts = {
    maxReceiveBytes: GRPC_OPTIONS['grpc.max_receive_message_length'],
    maxSendBytes: GRPC_OPTIONS['grpc.max_send_message_length'],
    decode: infer.requestDeserialize as (b: Buffer) => ModelInferRequest,
    encode: infer.responseSerialize as (m: ModelInferResponse<Uint8Array>) => Buffer,
  };
  // The direct path does not check restrictions: with `inference` restricted, grpc-js serves ModelInfer.
  const direct = !opts.restricted?.has('inference') && transport.grpcDirectInfer;
  const sock = opts.unixSocket;
  if (sock) removeStaleSocket(sock);
  const host = opts.host ?? '0.0.0.0';
  let port: number;
  let front: { close(): Promise<void> } | undefined;
  if (transport.grpcFront !== 'grpc-js') {
    // default and own: both listeners on our own HTTP/2 server; grpc-js behind it on a private loopback port (grpc-h2-front.ts).
    const internal = await bind('127.0.0.1:0');
    reachIntoGrpcJs(server, { widenHttp2: true, pooledDecoder: true });
    const f = await startH2Front({
      tcp: { host, port: opts.port },
      unixSocket: sock,
      limits: opts.h2Limits,
      grpcJs: `http://127.0.0.1:${internal}`,
      direct: direct ? { api, opts: directOpts } : undefined,
    });
    port = f.port;
    front = f;
  } else {
    // grpc-js: both listeners on node:http2. 1 MiB frames and 16/32 MiB windows, the direct ModelInfer path, the
    // receive-pool decoder: see grpc-js-internals.ts.
    port = await bind(`${host}:${opts.port}`);
    if (sock) await bind(`unix:${sock}`);
    reachIntoGrpcJs(server, {
      widenHttp2: true,
      route: direct ? directInferRoute(api, directOpts) : undefined,
      pooledDecoder: true,
    });
  }
  return {
    port,
    close: async () => {
      await front?.close();
      await new Promise<void>((resolve) => {
        const t = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 5000);
        server.tryShutdown(() => {
          clearTimeout(t);
          resolve();
        });
      });
      if (sock) removeStaleSocket(sock);
    },
  };
}
