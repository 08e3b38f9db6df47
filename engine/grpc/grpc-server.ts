// The KServe v2 / Triton gRPC frontend: inference.GRPCInferenceService (all
// 20 RPCs) and grpc.health.v1.Health over the engine's ServerApi. Handlers
// check, translate, call the engine and reply; every failure leaves through
// replyError.
import * as grpc from '@grpc/grpc-js';
import type { ServerApi } from '../server-api.ts';
import { GRPC_OPTIONS, healthService, inferenceService } from '../../protocol/index.ts';
import { capMessage, grpcStatusOf, invalidArg, toStatusError } from '../status.ts';
import { log } from '../trace.ts';
import { paramValue, toInferRequest, toInferResponse } from './grpc-tensors.ts';

type Msg = Record<string, any>;
type Unary = (req: Msg, call: grpc.ServerUnaryCall<Msg, Msg>) => Promise<Msg> | Msg;

function replyError(cb: grpc.sendUnaryData<Msg>, err: unknown): void {
  const se = toStatusError(err);
  if (se.code === 'INTERNAL') log.error(se.message, se.detail ?? err);
  cb({ code: grpcStatusOf(se.code), details: capMessage(se.message) } as grpc.ServiceError, null);
}

function unary(fn: Unary): grpc.handleUnaryCall<Msg, Msg> {
  return (call, cb) => {
    Promise.resolve()
      .then(() => fn(call.request, call))
      .then((res) => cb(null, res), (err) => replyError(cb, err));
  };
}

/** The peer of a call, for logs of who asked for what. */
const peer = (call: { getPeer(): string }) => {
  try {
    return call.getPeer();
  } catch {
    return 'unknown';
  }
};

function repositoryParams(p: Msg | undefined): { config?: string; files: Record<string, Uint8Array>; unloadDependents: boolean } {
  const files: Record<string, Uint8Array> = {};
  let config: string | undefined;
  let unloadDependents = false;
  for (const [k, v] of Object.entries(p ?? {})) {
    const m = v as Msg;
    const choice = m.parameter_choice;
    if (k === 'config') config = String(m.string_param ?? '');
    else if (k.startsWith('file:')) {
      if (choice !== 'bytes_param') throw invalidArg(`load parameter '${k}' must be bytes`);
      files[k.slice(5)] = m.bytes_param;
    } else if (k === 'unload_dependents') unloadDependents = !!m.bool_param;
    else throw invalidArg(`unknown repository parameter '${k}'`);
  }
  return { config, files, unloadDependents };
}

function handlers(api: ServerApi): grpc.UntypedServiceImplementation {
  return {
    ServerLive: unary(() => ({ live: api.isLive() })),
    ServerReady: unary(() => ({ ready: api.isReady() })),
    ModelReady: unary((r) => ({ ready: api.isModelReady(r.name, r.version || undefined) })),
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
      for (const [k, v] of Object.entries(r.settings ?? {})) update[k] = [...((v as Msg).value ?? [])];
      const s = api.traceSettings(r.model_name || undefined, Object.keys(update).length ? update : undefined);
      return { settings: Object.fromEntries(Object.entries(s).map(([k, v]) => [k, { value: v }])) };
    }),
    LogSettings: unary((r) => {
      const update: Record<string, boolean | number | string> = {};
      for (const [k, v] of Object.entries(r.settings ?? {})) update[k] = paramValue(v as Msg) as boolean | number | string;
      const s = api.logSettings(Object.keys(update).length ? update : undefined);
      const enc = (v: unknown) =>
        typeof v === 'boolean' ? { bool_param: v } : typeof v === 'number' ? { uint32_param: v } : { string_param: String(v) };
      return { settings: Object.fromEntries(Object.entries(s).map(([k, v]) => [k, enc(v)])) };
    }),
    ModelInfer: (call: grpc.ServerUnaryCall<Msg, Msg>, cb: grpc.sendUnaryData<Msg>) => {
      const ac = new AbortController();
      call.on('cancelled', () => ac.abort());
      let req;
      try {
        req = toInferRequest(call.request);
      } catch (err) {
        replyError(cb, err);
        return;
      }
      req.arrivalNs = process.hrtime.bigint();
      req.signal = ac.signal;
      api.infer(req).then((res) => cb(null, toInferResponse(res)), (err) => replyError(cb, err));
    },
    ModelStreamInfer: (call: grpc.ServerDuplexStream<Msg, Msg>) => {
      let pending = 0;
      let ended = false;
      const maybeEnd = () => ended && pending === 0 && call.end();
      call.on('data', (m: Msg) => {
        pending++;
        Promise.resolve()
          .then(() => {
            const req = toInferRequest(m);
            req.arrivalNs = process.hrtime.bigint();
            return api.infer(req);
          })
          .then(
            (res) => call.write({ error_message: '', infer_response: toInferResponse(res) }),
            (err) => call.write({ error_message: capMessage(toStatusError(err).message), infer_response: { model_name: m.model_name, id: m.id } }),
          )
          .finally(() => {
            pending--;
            maybeEnd();
          });
      });
      call.on('end', () => {
        ended = true;
        maybeEnd();
      });
    },
  };
}

/** Start the gRPC server; port 0 picks a free one. */
export async function startGrpcServer(api: ServerApi, opts: { port: number; host?: string }): Promise<{ port: number; close(): Promise<void> }> {
  const server = new grpc.Server(GRPC_OPTIONS);
  server.addService(inferenceService(), handlers(api));
  server.addService(healthService(), {
    Check: unary(() => ({ status: api.isReady() ? 'SERVING' : 'NOT_SERVING' })),
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${opts.host ?? '0.0.0.0'}:${opts.port}`, grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        const t = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 5000);
        server.tryShutdown(() => {
          clearTimeout(t);
          resolve();
        });
      }),
  };
}
