// Health and server metadata: GET /v2/health/live, /v2/health/ready, /v2.
// Like Triton, a negative health answer is 400 with an empty body.
import type { Hono } from 'hono';
import type { ServerApi } from '../../api/server-api.ts';
import { emptyReply, replyJson, type HttpEnv } from './http-util.ts';

export function registerHealthRoutes(app: Hono<HttpEnv>, api: ServerApi): void {
  app.get('/v2/health/live', (c) => emptyReply(c, api.isLive() ? 200 : 400));
  app.get('/v2/health/ready', (c) => emptyReply(c, api.isReady() ? 200 : 400));
  app.get('/v2', (c) => replyJson(c, { name: api.name, version: api.version, extensions: api.extensions }));
}
