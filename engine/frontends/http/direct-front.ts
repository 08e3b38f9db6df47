// The infer route on the lean HTTP/1.1 front (net/http1/http1-front.ts): the
// requests direct-infer.ts serves from node:http, read and answered without
// node:http's request and response objects when the request is a plain,
// complete one (docs/gateway/performance.md, "A lean HTTP/1.1 front"; the
// engine's rows in docs/benchmarks.md). Triton's perf_analyzer drives HTTP
// this way by default: one request in flight per keep-alive connection.
// Everything the front does not take (other routes, a body over 64 KiB or
// over the input limit, any head outside its subset) reaches node:http and
// from there directInferListener or the Hono app, which answer as before.
import type { Http1Handler } from '../../../net/http1/http1-front.ts';
import type { ServerApi } from '../../api/server-api.ts';
import { RequestCancel } from '../../api/cancel-signal.ts';
import { errorHead, inferTarget, replyHead, type InferTarget } from './direct-infer.ts';
import { errorReply } from './http-util.ts';
import { handleInfer } from './infer-handler.ts';

/** Bodies up to this are read by the front; larger ones keep node:http's streaming reader. */
export const MAX_FRONT_BODY = 64 * 1024;

export function directInferFront(api: ServerApi, maxInputBytes: number): Http1Handler<InferTarget> {
  return {
    maxBody: Math.min(MAX_FRONT_BODY, maxInputBytes),
    accepts: (head) => inferTarget(head.method, head.target, head.headers.get('host')),
    serve: async ({ head, route: { model, version }, body, onClose }) => {
      const arrivalNs = process.hrtime.bigint();
      const cancel = new RequestCancel();
      onClose(() => cancel.abort());
      try {
        const reply = await handleInfer(api, body, {
          model,
          version,
          headerLength: head.headers.get('inference-header-content-length'),
          traceparent: head.headers.get('traceparent'),
          signal: cancel,
          arrivalNs,
        });
        return { status: 200, headers: replyHead(reply), body: reply.body };
      } catch (err) {
        const { status, text } = errorReply(err, `POST ${head.target}`);
        return { status, headers: errorHead(text), body: text };
      }
    },
  };
}
