// Shared-memory extensions: /v2/systemsharedmemory and /v2/cudasharedmemory
// status, register and unregister, with Triton's paths and body shapes. An
// empty region name means "all regions", as in Triton's gRPC messages.
import type { Hono } from 'hono';
import type { ServerApi } from '../../api/server-api.ts';
import { invalidArg } from '../../api/status.ts';
import { emptyReply, readJsonBody, replyJson, type HttpEnv } from './http-util.ts';

function nonNegInt(body: Record<string, unknown>, field: string, region: string, required: boolean): number {
  const v = body[field];
  if (v === undefined && !required) return 0;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
    throw invalidArg(`'${field}' of the register request for region '${region}' must be a non-negative integer`);
  }
  return v;
}

export function registerSharedMemoryRoutes(app: Hono<HttpEnv>, api: ServerApi): void {
  const sys = '/v2/systemsharedmemory';
  app.get(`${sys}/status`, (c) => replyJson(c, api.shmStatus()));
  app.get(`${sys}/region/:region/status`, (c) => replyJson(c, api.shmStatus(c.req.param('region'))));
  app.post(`${sys}/region/:region/register`, async (c) => {
    const region = c.req.param('region');
    const body = await readJsonBody(c, 'register request');
    if (typeof body.key !== 'string' || body.key === '') {
      throw invalidArg(`'key' of the register request for region '${region}' must be a non-empty string`);
    }
    api.shmRegister(region, body.key, nonNegInt(body, 'offset', region, false), nonNegInt(body, 'byte_size', region, true));
    return emptyReply(c, 200);
  });
  app.post(`${sys}/region/:region/unregister`, (c) => {
    api.shmUnregister(c.req.param('region'));
    return emptyReply(c, 200);
  });
  app.post(`${sys}/unregister`, (c) => {
    api.shmUnregister('');
    return emptyReply(c, 200);
  });

  const cuda = '/v2/cudasharedmemory';
  app.get(`${cuda}/status`, (c) => replyJson(c, api.cudaShmStatus()));
  app.get(`${cuda}/region/:region/status`, (c) => replyJson(c, api.cudaShmStatus(c.req.param('region'))));
  app.post(`${cuda}/region/:region/register`, async (c) => {
    const region = c.req.param('region');
    const body = await readJsonBody(c, 'register request');
    const raw = body.raw_handle as { b64?: unknown } | undefined;
    if (typeof raw !== 'object' || raw === null || typeof raw.b64 !== 'string') {
      throw invalidArg(`'raw_handle' of the register request for region '${region}' must be {"b64": "<base64>"}`);
    }
    const handle = new Uint8Array(Buffer.from(raw.b64, 'base64'));
    api.cudaShmRegister(region, handle, nonNegInt(body, 'device_id', region, false), nonNegInt(body, 'byte_size', region, true));
    return emptyReply(c, 200);
  });
  app.post(`${cuda}/region/:region/unregister`, (c) => {
    api.cudaShmUnregister(c.req.param('region'));
    return emptyReply(c, 200);
  });
  app.post(`${cuda}/unregister`, (c) => {
    api.cudaShmUnregister('');
    return emptyReply(c, 200);
  });
}
