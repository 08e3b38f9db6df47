// The cancellation signal of an HTTP inference request.
//
// Hono's node-server builds `c.req.raw.signal` on first access: an
// AbortController (and its AbortSignal EventTarget) per request, ~3 % of the
// engine's main thread on the tiny recommender under wrk (issue 14, round 2
// profile). A RequestCancel (engine/api/cancel-signal.ts) fired from the Node
// response's 'close' does the same job: it aborts when the connection closes
// before the reply was written, the condition node-server itself uses.
// Without Node bindings (the app driven by app.request() in tests) the
// request's own AbortSignal is used.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { RequestCancel, type CancelSignal } from '../../api/cancel-signal.ts';
import type { Ctx } from './http-util.ts';

export function requestSignal(c: Ctx): CancelSignal {
  const { incoming, outgoing } = c.env ?? {};
  if (!incoming || !outgoing) return c.req.raw.signal;
  return nodeRequestSignal(incoming, outgoing);
}

/** Aborts when `outgoing` closes before its reply was written (or the request errored). */
export function nodeRequestSignal(incoming: IncomingMessage, outgoing: ServerResponse): CancelSignal {
  const cancel = new RequestCancel();
  outgoing.once('close', () => {
    if (incoming.errored || !outgoing.writableFinished) cancel.abort();
  });
  return cancel;
}
