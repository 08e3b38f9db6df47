// The engine's KServe v2 HTTP/REST frontend (Triton's HTTP API, default port
// 8000). Owns the Hono app and its node:http server, whose listener answers
// POST .../infer itself (direct-infer.ts) and hands Hono the rest; it
// translates wire <-> ServerApi calls only and never runs a model (the
// event-loop thread stays free).
import type { AddressInfo } from 'node:net';
import { Hono } from 'hono';
import { createServer } from 'node:http';
import { getRequestListener, type ServerType } from '@hono/node-server';
import type { ServerApi } from '../../api/server-api.ts';
import { replyError, replyJson, type HttpEnv } from './http-util.ts';
import { DEFAULT_MAX_INPUT_BYTES } from './incoming-body.ts';
import { registerHealthRoutes } from './routes-health.ts';
import { directInferListener } from './direct-infer.ts';
import { registerInferRoutes } from './routes-infer.ts';
import { registerModelRoutes } from './routes-models.ts';
import { registerRepositoryRoutes } from './routes-repository.ts';
import { registerSharedMemoryRoutes } from './routes-shared-memory.ts';
import { registerSettingsRoutes } from './routes-settings.ts';

export interface HttpAppOptions {
  /** Largest accepted request body (Triton's --http-max-input-size). */
  maxInputBytes?: number;
}

/** The Hono app serving Triton's HTTP API over `api`. */
export function createHttpApp(api: ServerApi, opts: HttpAppOptions = {}): Hono<HttpEnv> {
  const app = new Hono<HttpEnv>();
  registerHealthRoutes(app, api);
  registerSharedMemoryRoutes(app, api);
  registerRepositoryRoutes(app, api);
  registerSettingsRoutes(app, api);
  registerModelRoutes(app, api);
  registerInferRoutes(app, api, opts.maxInputBytes ?? DEFAULT_MAX_INPUT_BYTES);
  app.notFound((c) => replyJson(c, { error: `no endpoint for ${c.req.method} ${c.req.path}` }, 404));
  app.onError((err, c) => replyError(c, err));
  return app;
}

export interface RunningServer {
  /** The bound port (the ephemeral one when asked for port 0). */
  port: number;
  close(): Promise<void>;
}

/** Listen on `port` (0 = ephemeral) and resolve once bound; close() ends idle keep-alive sockets too. */
export function listen(server: ServerType, port: number, host: string | undefined): Promise<RunningServer> {
  const http = server as import('node:http').Server;
  return new Promise((resolve, reject) => {
    const onError = (e: Error) => reject(e);
    http.once('error', onError);
    http.listen(port, host, () => {
      http.off('error', onError);
      const bound = (http.address() as AddressInfo).port;
      resolve({
        port: bound,
        close: () =>
          new Promise<void>((res, rej) => {
            http.close((e) => (e ? rej(e) : res()));
            http.closeIdleConnections();
            // In-flight requests get a moment to finish, then their sockets go.
            setTimeout(() => http.closeAllConnections(), 1000).unref();
          }),
      });
    });
  });
}

/** Start the HTTP frontend (Triton's HTTPService). */
export function startHttpServer(
  api: ServerApi,
  opts: { port: number; host?: string } & HttpAppOptions,
): Promise<RunningServer> {
  const app = createHttpApp(api, opts);
  // What createAdaptorServer builds, with the infer route answered ahead of Hono (direct-infer.ts).
  const server = createServer(directInferListener(api, opts.maxInputBytes ?? DEFAULT_MAX_INPUT_BYTES, getRequestListener(app.fetch)));
  return listen(server, opts.port, opts.host);
}
