// Timeouts on slow clients of the engine's HTTP and metrics ports. Node's
// defaults allow 60 s for headers and 300 s for a whole request and look for
// expired ones only every 30 s, so a slowloris client (a header byte every
// few seconds) held a connection for minutes. Here each limit has a tighter
// default (flags --http-*-timeout-ms), is checked every second, and a timed
// out request gets a 408 with the engine's JSON error body before the close.
import type { Server, ServerOptions } from 'node:http';
import type { Duplex } from 'node:stream';
import { log } from '../../../common/logger.ts';

export interface HttpTimeouts {
  /** All request headers must arrive within this (ms). */
  headersMs: number;
  /** The whole body must arrive within this after the headers (ms). */
  bodyMs: number;
  /** A keep-alive connection idle this long between requests is closed (ms). */
  idleMs: number;
}

/** The gateway's defaults (gateway/http/http-timeouts.ts): 15 s for headers, 120 s for a body (large tensors), 5 s idle. */
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

/** Answer timed-out requests with a 408 and a JSON error (Node's own reply is bare), other client errors with a 400; then close. */
export function handleClientErrors(server: Server, t: HttpTimeouts, port: string): void {
  const body = JSON.stringify({
    error: `request not received in time (headers within ${t.headersMs} ms, body within ${t.bodyMs} ms more)`,
  });
  const timeoutReply = `HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    const sent = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent;
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      log.warn(`${port}: closing a connection whose request did not arrive in time`);
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
