// POST /v2/models/{m}[/versions/{v}]/infer through Hono. Under node:http the
// direct path (direct-infer.ts) answers the usual request targets first; this
// route serves the rest (targets node-server rewrites, such as dot segments
// or absolute form) and the app driven by app.request() in tests. Both run
// infer-handler.ts.
import type { Hono } from 'hono';
import type { ServerApi } from '../../api/server-api.ts';
import { HEADER_LENGTH } from './binary-extension.ts';
import { readBody, versionParam, type HttpEnv } from './http-util.ts';
import { handleInfer } from './infer-handler.ts';
import { modelRoute } from './routes-models.ts';
import { requestSignal } from './request-signal.ts';

export function registerInferRoutes(app: Hono<HttpEnv>, api: ServerApi, maxInputBytes: number): void {
  modelRoute(app, 'post', '/infer', async (c) => {
    const arrivalNs = process.hrtime.bigint();
    const body = await readBody(c, maxInputBytes);
    const reply = await handleInfer(api, body, {
      model: c.req.param('model')!,
      version: versionParam(c),
      headerLength: c.req.header(HEADER_LENGTH),
      traceparent: c.req.header('traceparent'),
      signal: requestSignal(c), // not c.req.raw.signal: see request-signal.ts
      arrivalNs,
    });
    const out = reply.body as Uint8Array<ArrayBuffer>;
    if (reply.headerLength === undefined) return c.body(out, 200, { 'Content-Type': 'application/json' });
    return c.body(out, 200, {
      'Content-Type': 'application/octet-stream',
      [HEADER_LENGTH]: String(reply.headerLength),
    });
  });
}
