// The direct route on the lean HTTP/1.1 front (net/http1/http1-front.ts): the
// same calls direct-call.ts serves from node:http, read and answered without
// node:http's request and response objects when the request is a plain,
// complete one (docs/gateway/performance.md, "A lean HTTP/1.1 front").
// Everything the front does not take (other routes, a body over MAX_BODY, a
// streaming function, any head outside its subset) reaches node:http and
// from there directCallListener or the Hono app, which answer as before.
import type { Http1Handler } from '../../net/http1/http1-front.ts';
import { directTarget, resolveDirect, serveCall, tooLarge, type CallRequest, type DirectCallDeps } from './direct-call.ts';

/**
 * Bodies up to this are read by the front; larger ones (those the gateway
 * stages through shm start at 64 KiB by default) keep node:http's streaming
 * reader, unchanged.
 */
export const MAX_FRONT_BODY = 64 * 1024;

export function directCallFront(deps: DirectCallDeps): Http1Handler<string> {
  return {
    maxBody: MAX_FRONT_BODY,
    accepts: (head) => directTarget(deps, head.method, head.target, (k) => head.headers.get(k)),
    serve: async ({ head, route: name, body }) => {
      const pre = await resolveDirect(deps, name);
      if (!pre) return undefined;
      const request: CallRequest = {
        url: head.target,
        header: (k) => head.headers.get(k),
        body: async (reply, limit, fn) => {
          if (body.length > limit) throw tooLarge(undefined, reply, fn, limit);
          return body;
        },
      };
      return serveCall(deps, request, pre);
    },
  };
}
