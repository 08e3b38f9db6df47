// Timeouts on slow clients. Node's defaults close slow headers after ~83 s and
// slow bodies after ~323 s, checking only every 30 s, and answer a bare 408.
// Here each limit is a flag with a tighter default, checked every second, and
// the 408 carries the error catalog's JSON body like every other reply.
import type { Server, ServerOptions } from 'node:http';
import type { Duplex } from 'node:stream';
import { gatewayError } from '../core/errors.ts';
import { gatewayLog as log } from '../../common/logger.ts';

export interface HttpTimeouts {
  /** All request headers must arrive within this (ms). */
  headersMs: number;
  /** The whole body must arrive within this after the headers (ms). */
  bodyMs: number;
  /** A keep-alive connection idle this long between requests is closed (ms). */
  idleMs: number;
}

export const DEFAULT_HTTP_TIMEOUTS: HttpTimeouts = { headersMs: 15_000, bodyMs: 120_000, idleMs: 5_000 };

/** Options for http.createServer carrying the timeouts. */
export function timeoutServerOptions(t: HttpTimeouts): ServerOptions {
  return {
    headersTimeout: t.headersMs,
    // Node's requestTimeout counts from the first byte: headers plus body.
    requestTimeout: t.headersMs + t.bodyMs,
    keepAliveTimeout: t.idleMs,
    // How often expired requests are found; Node's default (30 s) would blur every limit above.
    connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(Math.min(t.headersMs, t.bodyMs) / 4))),
  };
}

/** The raw HTTP/1.1 reply for a request that timed out: 408 with the catalog body, then close. */
export function requestTimeoutReply(t: HttpTimeouts): string {
  const e = gatewayError('REQUEST_TIMEOUT', { headersMs: t.headersMs, bodyMs: t.bodyMs });
  const body = JSON.stringify(e.toJSON());
  return `HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}

/** Answer timed-out requests (and other client errors) ourselves instead of Node's bare replies. */
export function handleClientErrors(server: Server, t: HttpTimeouts): void {
  const timeoutReply = requestTimeoutReply(t);
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    const sent = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent;
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      log.warn(`closing a connection: request not received in time (${err.message})`);
      if (socket.writable && !sent) socket.end(timeoutReply);
      // Give the reply a moment to leave before the socket goes.
      setTimeout(() => socket.destroy(), 1000).unref();
      return;
    }
    if (err.code === 'ECONNRESET' || !socket.writable || sent) {
      socket.destroy();
      return;
    }
    socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
  });
}
