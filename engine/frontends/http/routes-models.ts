// Per-model endpoints: metadata, readiness, config and statistics, each with
// and without the /versions/{v} segment (Triton's paths).
import type { Hono, Handler } from 'hono';
import type { ServerApi } from '../../api/server-api.ts';
import { emptyReply, replyJson, versionParam, type HttpEnv } from './http-util.ts';

type H = Handler<HttpEnv>;

/** Register `handler` for /v2/models/{m}{suffix} and /v2/models/{m}/versions/{v}{suffix}. */
export function modelRoute(app: Hono<HttpEnv>, method: 'get' | 'post', suffix: string, handler: H): void {
  app[method](`/v2/models/:model${suffix}`, handler);
  app[method](`/v2/models/:model/versions/:version${suffix}`, handler);
}

export function registerModelRoutes(app: Hono<HttpEnv>, api: ServerApi): void {
  // Before /v2/models/:model so "stats" is not taken for a model name.
  app.get('/v2/models/stats', (c) => replyJson(c, { model_stats: api.modelStatistics() }));
  modelRoute(app, 'get', '/stats', (c) => replyJson(c, { model_stats: api.modelStatistics(c.req.param('model'), versionParam(c)) }));
  modelRoute(app, 'get', '/ready', async (c) =>
    emptyReply(c, (await api.probeModelReady(c.req.param('model')!, versionParam(c))) ? 200 : 400),
  );
  modelRoute(app, 'get', '/config', (c) => replyJson(c, api.modelConfig(c.req.param('model')!, versionParam(c))));
  modelRoute(app, 'get', '', (c) => replyJson(c, api.modelMetadata(c.req.param('model')!, versionParam(c))));
}
