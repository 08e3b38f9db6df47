// POST /v2/models/{m}[/versions/{v}]/infer: read the body, build the engine
// request, submit, reply (JSON, or JSON header + binary outputs).
import type { Hono } from 'hono';
import type { ServerApi } from '../server-api.ts';
import { HEADER_LENGTH } from './binary-extension.ts';
import { readBody, versionParam, type HttpEnv } from './http-util.ts';
import { encodeInferResponse, parseInferRequest } from './infer-json.ts';
import { modelRoute } from './routes-models.ts';
import { DECOUPLED_HTTP_MESSAGE, rejectDecoupled } from '../decoupled.ts';
import { release } from '../receive-pool.ts';
import { requestSignal } from './request-signal.ts';

export function registerInferRoutes(app: Hono<HttpEnv>, api: ServerApi, maxInputBytes: number): void {
  modelRoute(app, 'post', '/infer', async (c) => {
    const arrivalNs = process.hrtime.bigint();
    const body = await readBody(c, maxInputBytes);
    let encoded;
    try {
      const { request, binaryOutputDefault } = parseInferRequest(body, c.req.header(HEADER_LENGTH), c.req.param('model')!, versionParam(c));
      request.arrivalNs = arrivalNs;
      request.signal = requestSignal(c); // not c.req.raw.signal: see request-signal.ts
      rejectDecoupled(api, request.modelName, request.modelVersion, DECOUPLED_HTTP_MESSAGE);
      request.traceparent = c.req.header('traceparent');
      const response = await api.infer(request);
      encoded = encodeInferResponse(response, request.outputs, binaryOutputDefault);
    } finally {
      // The inputs are views of the body: once the inference has settled and
      // the reply is encoded (outputs copied into it), nothing reads them.
      release(body);
    }
    const out = encoded.body as Uint8Array<ArrayBuffer>;
    if (encoded.headerLength === undefined) return c.body(out, 200, { 'Content-Type': 'application/json' });
    return c.body(out, 200, {
      'Content-Type': 'application/octet-stream',
      [HEADER_LENGTH]: String(encoded.headerLength),
    });
  });
}
