// Logging and trace settings: GET/POST /v2/logging, /v2/trace/setting and
// /v2/models/{m}/trace/setting. Trace values travel as strings, except
// trace_level which is an array; null in an update clears a model's override.
import type { Hono } from 'hono';
import type { ServerApi } from '../../api/server-api.ts';
import { invalidArg } from '../../api/status.ts';
import { readJsonBody, replyJson, type Ctx, type HttpEnv } from './http-util.ts';

/** Engine trace settings (string lists) -> Triton's JSON shape. */
export function traceSettingsToJson(s: Record<string, string[]>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(s)) out[k] = k === 'trace_level' ? v : (v[0] ?? '');
  return out;
}

/** A JSON trace update -> engine string lists ([] = clear). */
export function traceUpdateFromJson(body: Record<string, unknown>): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [k, v] of Object.entries(body)) {
    if (v === null) out[k] = [];
    else if (typeof v === 'string' || typeof v === 'number') out[k] = [String(v)];
    else if (Array.isArray(v) && v.every((x) => typeof x === 'string')) out[k] = v as string[];
    else throw invalidArg(`trace setting '${k}' must be a string, an array of strings or null`);
  }
  return out;
}

function logUpdateFromJson(body: Record<string, unknown>): Record<string, boolean | number | string> {
  const out: Record<string, boolean | number | string> = {};
  for (const [k, v] of Object.entries(body)) {
    // null leaves a setting as it is (Triton's).
    if (v === null) continue;
    if (typeof v !== 'boolean' && typeof v !== 'number' && typeof v !== 'string') {
      throw invalidArg(`log setting '${k}' must be a boolean, number or string`);
    }
    out[k] = v;
  }
  return out;
}

export function registerSettingsRoutes(app: Hono<HttpEnv>, api: ServerApi): void {
  app.get('/v2/logging', (c) => replyJson(c, api.logSettings()));
  app.post('/v2/logging', async (c) => {
    const body = await readJsonBody(c, 'logging settings');
    return replyJson(c, api.logSettings(logUpdateFromJson(body)));
  });
  const getTrace = (model: (c: Ctx) => string | undefined) => (c: Ctx) => replyJson(c, traceSettingsToJson(api.traceSettings(model(c))));
  const postTrace = (model: (c: Ctx) => string | undefined) => async (c: Ctx) => {
    const body = await readJsonBody(c, 'trace settings');
    return replyJson(c, traceSettingsToJson(api.traceSettings(model(c), traceUpdateFromJson(body))));
  };
  const global = () => undefined;
  const perModel = (c: Ctx) => c.req.param('model');
  app.get('/v2/trace/setting', getTrace(global));
  app.post('/v2/trace/setting', postTrace(global));
  app.get('/v2/models/:model/trace/setting', getTrace(perModel));
  app.post('/v2/models/:model/trace/setting', postTrace(perModel));
}
