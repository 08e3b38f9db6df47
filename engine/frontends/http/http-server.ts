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
import { directInferFront } from './direct-front.ts';
import { Http1Front } from '../../../net/http1/http1-front.ts';
import { registerInferRoutes } from './routes-infer.ts';
import { registerGenerateRoutes } from './generate-routes.ts';
import { registerModelRoutes } from './routes-models.ts';
import { registerRepositoryRoutes } from './routes-repository.ts';
import { registerSharedMemoryRoutes } from './routes-shared-memory.ts';
import { registerSettingsRoutes } from './routes-settings.ts';
import { DEFAULT_HTTP_TIMEOUTS, handleClientErrors, timeoutServerOptions, type HttpTimeouts } from './http-timeouts.ts';
import { DEFAULT_STREAM_MAX_QUEUED_BYTES } from '../stream-queue-bound.ts';
import { DEFAULT_ENGINE_TRANSPORT } from '../transport-options.ts';
import { failedRestriction, httpApiGroup, httpRestrictedText, type RestrictedFeatures } from '../restricted-api.ts';

export interface HttpAppOptions {
  /** Largest accepted request body (Triton's --http-max-input-size). */
  maxInputBytes?: number;
  /** --http-restricted-api groups: a request without the group's header gets Triton's 403. */
  restricted?: RestrictedFeatures;
  /** Bytes of generate_stream events one stream may hold for a client that is not reading (stream-queue-bound.ts). */
  streamMaxQueuedBytes?: number;
}

/** The Hono app serving Triton's HTTP API over `api`. */
export function createHttpApp(api: ServerApi, opts: HttpAppOptions = {}): Hono<HttpEnv> {
  const app = new Hono<HttpEnv>();
  const restricted = opts.restricted;
  // First, on the path the router matches (decoded), before any method check: as Triton's handlers do.
  if (restricted?.size) {
    app.use('*', async (c, next) => {
      const r = failedRestriction(restricted, httpApiGroup(c.req.path), (h) => c.req.header(h));
      if (r) return replyJson(c, { error: httpRestrictedText(r) }, 403);
      await next();
    });
  }
  registerHealthRoutes(app, api);
  registerSharedMemoryRoutes(app, api);
  registerRepositoryRoutes(app, api);
  registerSettingsRoutes(app, api);
  registerModelRoutes(app, api);
  registerInferRoutes(app, api, opts.maxInputBytes ?? DEFAULT_MAX_INPUT_BYTES);
  registerGenerateRoutes(
    app,
    api,
    opts.maxInputBytes ?? DEFAULT_MAX_INPUT_BYTES,
    opts.streamMaxQueuedBytes ?? DEFAULT_STREAM_MAX_QUEUED_BYTES,
  );
  app.notFound((c) => replyJson(c, { error: `no endpoint for ${c.req.method} ${c.req.path}` }, 404));
  app.onError((err, c) => replyError(c, err));
  return app;
}

export interface RunningServer {
  /** The bound port (the ephemeral one when asked for port 0). */
  port: number;
  /** The lean HTTP/1.1 front, when on (its counters tell which requests it served). */
  http1Front?: Http1Front;
  close(): Promise<void>;
}

/** Listen on `port` (0 = ephemeral) and resolve once bound; close() ends idle keep-alive sockets too. */
export function listen(server: ServerType, port: number, host: string | undefined, front?: Http1Front): Promise<RunningServer> {
  const http = server as import('node:http').Server;
  return new Promise((resolve, reject) => {
    const onError = (e: Error) => reject(e);
    http.once('error', onError);
    http.listen(port, host, () => {
      http.off('error', onError);
      const bound = (http.address() as AddressInfo).port;
      resolve({
        port: bound,
        http1Front: front,
        close: () =>
          new Promise<void>((res, rej) => {
            http.close((e) => (e ? rej(e) : res()));
            http.closeIdleConnections();
            front?.closeIdle();
            // In-flight requests get a moment to finish, then their sockets go.
            setTimeout(() => {
              http.closeAllConnections();
              front?.closeAll();
            }, 1000).unref();
          }),
      });
    });
  });
}

/** Start the HTTP frontend (Triton's HTTPService). */
export function startHttpServer(
  api: ServerApi,
  opts: {
    port: number;
    host?: string;
    timeouts?: HttpTimeouts;
    /** The lean HTTP/1.1 front for plain infer requests (transport-options.ts `http1Front`; default on). */
    http1Front?: boolean;
  } & HttpAppOptions,
): Promise<RunningServer> {
  const app = createHttpApp(api, opts);
  const hono = getRequestListener(app.fetch);
  // What createAdaptorServer builds, with the infer route answered ahead of Hono (direct-infer.ts);
  // the direct path does not check restrictions, so with `inference` restricted Hono serves it.
  const direct = !opts.restricted?.has('inference');
  const maxInputBytes = opts.maxInputBytes ?? DEFAULT_MAX_INPUT_BYTES;
  const listener = direct ? directInferListener(api, maxInputBytes, hono) : hono;
  const timeouts = opts.timeouts ?? DEFAULT_HTTP_TIMEOUTS;
  const server = createServer(timeoutServerOptions(timeouts), listener);
  handleClientErrors(server, timeouts, 'HTTP');
  // Plain, complete infer requests on the lean HTTP/1.1 front (direct-front.ts), the rest through node:http as above.
  const onFront = direct && (opts.http1Front ?? DEFAULT_ENGINE_TRANSPORT.http1Front);
  const front = onFront
    ? Http1Front.attach(server, directInferFront(api, maxInputBytes), { idleMs: timeouts.idleMs, headersMs: timeouts.headersMs })
    : undefined;
  return listen(server, opts.port, opts.host, front);
}
