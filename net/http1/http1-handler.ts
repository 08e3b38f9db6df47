// What the HTTP/1.1 front (http1-front.ts) asks of the route it serves, and
// its options: the contract its callers (the engine's and the gateway's direct
// fronts) implement.
import type { Http1Head } from './http1-head.ts';
import type { Http1Reply } from './http1-reply.ts';

export interface Http1Request<R = unknown> {
  head: Http1Head;
  /** What accepts() returned for this head (the route it read, so serve() need not read it again). */
  route: R;
  body: Buffer;
  /** Calls `listener` if the connection closes before this request's reply was written (a cancelled call). */
  onClose(listener: () => void): void;
}

export interface Http1Handler<R = unknown> {
  /** Largest body served here; larger ones go to node:http. */
  maxBody: number;
  /** The route this head is for when it is the front's to serve (synchronous, cheap); undefined hands the connection to node:http. */
  accepts(head: Http1Head): R | undefined;
  /** The reply, or undefined to hand the request (and the connection) to node:http after all. Never rejects. */
  serve(req: Http1Request<R>): Promise<Http1Reply | undefined>;
}

export interface Http1FrontOptions {
  /** node:http's keepAliveTimeout: idle time between requests (ms), announced as Keep-Alive: timeout=. */
  idleMs: number;
  /**
   * node:http's headersTimeout (ms), kept by the front itself: a request's head must have arrived this long after its
   * first byte, or after the connection opened for its first request; else 408 (the server's 'clientError') and the close.
   */
  headersMs: number;
  /**
   * Pipelined requests (already read, queued behind each other on one connection) served one after another before
   * the connection yields a turn of the event loop (setImmediate) to other sockets; default PIPELINE_PER_TURN.
   */
  pipelinePerTurn?: number;
}

/** Default Http1FrontOptions.pipelinePerTurn. */
export const PIPELINE_PER_TURN = 16;
