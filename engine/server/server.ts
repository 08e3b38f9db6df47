// Starts the whole engine in this process: the InferenceServer (repository,
// models, shared memory) and its gRPC, HTTP and metrics frontends.
import { InferenceServer, type InferenceServerOptions } from './inference-server.ts';
import { startGrpcServer } from '../frontends/grpc/grpc-server.ts';
import type { H2Limits } from '../../net/h2/h2-limits.ts';
import type { StreamPacing } from '../frontends/grpc/stream-response-pacer.ts';
import { startHttpServer } from '../frontends/http/http-server.ts';
import { startMetricsServer } from '../frontends/metrics/metrics.ts';
import { startLocalServer } from '../frontends/local/local-server.ts';
import type { ServerApi } from '../api/server-api.ts';
import type { RestrictedFeatures } from '../frontends/restricted-api.ts';
import type { HttpTimeouts } from '../frontends/http/http-timeouts.ts';
import type { EngineTransport } from '../frontends/transport-options.ts';
import { log } from '../../common/logger.ts';

export interface EngineOptions extends InferenceServerOptions {
  host?: string;
  /** 0 = a free port; -1 = do not start this frontend. */
  grpcPort?: number;
  /** Also serve gRPC on this Unix socket path (a colocated gateway skips loopback TCP). */
  grpcUnixSocket?: string;
  /** Serve the local channel (unary ModelInfer without HTTP/2, docs/engine/local-channel.md) on this Unix socket path. */
  localSocket?: string;
  httpPort?: number;
  metricsPort?: number;
  /** --http-restricted-api: groups of HTTP endpoints that need a header. */
  httpRestricted?: RestrictedFeatures;
  /** --grpc-restricted-protocol: groups of RPCs that need a metadata entry. */
  grpcRestricted?: RestrictedFeatures;
  /** Header, body and idle limits of the HTTP and metrics ports (slow clients are dropped). */
  httpTimeouts?: HttpTimeouts;
  /** --stream-max-queued-bytes: what one streaming reply may hold for a client that is not reading (frontends/stream-queue-bound.ts). */
  streamMaxQueuedBytes?: number;
  /** --grpc-h2-limit: the own HTTP/2 front's bounds on what one client may make it spend (net/h2/h2-limits.ts). */
  grpcH2Limits?: H2Limits;
  /** Transport choices (frontends/transport-options.ts), built once by cli-options.ts; defaults where not given. */
  transport?: Partial<EngineTransport>;
  /** --grpc-max-response-pool-size and TRITONSERVER_DELAY_GRPC_RESPONSE: how ModelStreamInfer paces its writes. */
  grpcStreamPacing?: StreamPacing;
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
  const grpc =
    opts.grpcPort === -1
      ? undefined
      : await startGrpcServer(engine, {
          port: opts.grpcPort ?? 8001,
          host,
          unixSocket: opts.grpcUnixSocket,
          restricted: opts.grpcRestricted,
          streamMaxQueuedBytes: opts.streamMaxQueuedBytes,
          h2Limits: opts.grpcH2Limits,
          transport: opts.transport,
          streamPacing: opts.grpcStreamPacing,
        });
  const http =
    opts.httpPort === -1
      ? undefined
      : await startHttpServer(engine, {
          port: opts.httpPort ?? 8000,
          host,
          restricted: opts.httpRestricted,
          timeouts: opts.httpTimeouts,
          streamMaxQueuedBytes: opts.streamMaxQueuedBytes,
          http1Front: opts.transport?.http1Front,
        });
  const metrics =
    opts.metricsPort === -1
      ? undefined
      : await startMetricsServer(engine, { port: opts.metricsPort ?? 8002, host, timeouts: opts.httpTimeouts });
  const local = opts.localSocket ? await startLocalServer(engine, { path: opts.localSocket, restricted: opts.grpcRestricted }) : undefined;
  if (local) log.info(`started the local channel at ${local.path}`);
  if (grpc)
    log.info(`started GRPCInferenceService at ${host}:${grpc.port}${opts.grpcUnixSocket ? ` and unix:${opts.grpcUnixSocket}` : ''}`);
  try {
    await engine.start();
  } catch (err) {
    await Promise.all([grpc?.close(), http?.close(), metrics?.close(), local?.close()]);
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
        await Promise.all([grpc?.close(), http?.close(), metrics?.close(), local?.close()]);
      })()),
  };
}
