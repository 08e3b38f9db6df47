// Starts the whole engine in this process: the InferenceServer (repository,
// models, shared memory) and its gRPC, HTTP and metrics frontends.
import { InferenceServer, type InferenceServerOptions } from './inference-server.ts';
import { startGrpcServer } from '../frontends/grpc/grpc-server.ts';
import { startHttpServer } from '../frontends/http/http-server.ts';
import { startMetricsServer } from '../frontends/metrics/metrics.ts';
import type { ServerApi } from '../api/server-api.ts';
import { log } from '../../common/logger.ts';

export interface EngineOptions extends InferenceServerOptions {
  host?: string;
  /** 0 = a free port; -1 = do not start this frontend. */
  grpcPort?: number;
  /** Also serve gRPC on this Unix socket path (a colocated gateway skips loopback TCP). */
  grpcUnixSocket?: string;
  httpPort?: number;
  metricsPort?: number;
}

export interface RunningEngine {
  grpcPort: number;
  httpPort: number;
  metricsPort: number;
  server: ServerApi;
  /** The concrete server (tests and benchmarks reach its managers). */
  engine: InferenceServer;
  /** Stop accepting, finish in-flight requests, unload every model. */
  stop(): Promise<void>;
}

/** Load the repository and start the frontends (Triton's defaults: 8001 gRPC, 8000 HTTP, 8002 metrics). */
export async function startEngine(opts: EngineOptions): Promise<RunningEngine> {
  const engine = new InferenceServer(opts);
  const host = opts.host ?? '0.0.0.0';
  // Frontends first so liveness answers while models load; readiness follows loading.
  const grpc = opts.grpcPort === -1 ? undefined : await startGrpcServer(engine, { port: opts.grpcPort ?? 8001, host, unixSocket: opts.grpcUnixSocket });
  const http = opts.httpPort === -1 ? undefined : await startHttpServer(engine, { port: opts.httpPort ?? 8000, host });
  const metrics = opts.metricsPort === -1 ? undefined : await startMetricsServer(engine, { port: opts.metricsPort ?? 8002, host });
  if (grpc) log.info(`started GRPCInferenceService at ${host}:${grpc.port}${opts.grpcUnixSocket ? ` and unix:${opts.grpcUnixSocket}` : ''}`);
  try {
    await engine.start();
  } catch (err) {
    await Promise.all([grpc?.close(), http?.close(), metrics?.close()]);
    throw err;
  }
  let stopping: Promise<void> | undefined;
  return {
    grpcPort: grpc?.port ?? -1,
    httpPort: http?.port ?? -1,
    metricsPort: metrics?.port ?? -1,
    server: engine,
    engine,
    stop: () =>
      (stopping ??= (async () => {
        // Finish in-flight requests (schedulers drain on unload), then close the frontends.
        await engine.stop();
        await Promise.all([grpc?.close(), http?.close(), metrics?.close()]);
      })()),
  };
}
