// Model repository extension: POST /v2/repository/index, and
// /v2/repository/models/{m}/load | unload.
import type { Hono } from 'hono';
import type { LoadParameters, ServerApi } from '../../api/server-api.ts';
import { invalidArg } from '../../api/status.ts';
import { emptyReply, readJsonBody, replyJson, type HttpEnv } from './http-util.ts';
import { parseParameters } from './infer-json.ts';

/** Triton's load parameters: "config" (JSON text) and "file:<version>/<name>" (base64). */
export function parseLoadParameters(body: Record<string, unknown>, model: string): LoadParameters {
  const params = parseParameters(body.parameters, `the load request of model '${model}'`);
  const out: LoadParameters = {};
  for (const [k, v] of Object.entries(params)) {
    if (k === 'config') {
      if (typeof v !== 'string') throw invalidArg(`load parameter 'config' of model '${model}' must be a JSON string`);
      out.config = v;
    } else if (k.startsWith('file:')) {
      if (typeof v !== 'string') throw invalidArg(`load parameter '${k}' of model '${model}' must be base64 text`);
      (out.files ??= {})[k] = new Uint8Array(Buffer.from(v, 'base64'));
    } else {
      throw invalidArg(`unknown load parameter '${k}' for model '${model}'`);
    }
  }
  if (out.files && out.config === undefined) {
    throw invalidArg(`load of model '${model}' with file parameters needs the 'config' parameter`);
  }
  return out;
}

export function registerRepositoryRoutes(app: Hono<HttpEnv>, api: ServerApi): void {
  app.post('/v2/repository/index', async (c) => {
    const body = await readJsonBody(c, 'repository index request');
    if (body.ready !== undefined && typeof body.ready !== 'boolean') throw invalidArg(`'ready' must be a boolean`);
    return replyJson(c, api.repositoryIndex(body.ready === true));
  });
  app.post('/v2/repository/models/:model/load', async (c) => {
    const model = c.req.param('model');
    const body = await readJsonBody(c, 'load request');
    await api.loadModel(model, parseLoadParameters(body, model));
    return emptyReply(c, 200);
  });
  app.post('/v2/repository/models/:model/unload', async (c) => {
    const model = c.req.param('model');
    const body = await readJsonBody(c, 'unload request');
    const params = parseParameters(body.parameters, `the unload request of model '${model}'`);
    const dep = params.unload_dependents;
    if (dep !== undefined && typeof dep !== 'boolean') throw invalidArg(`'unload_dependents' must be a boolean`);
    await api.unloadModel(model, { unloadDependents: dep === true });
    return emptyReply(c, 200);
  });
}
