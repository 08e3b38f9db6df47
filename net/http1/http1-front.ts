// A lean HTTP/1.1 front for one hot route, ahead of node:http on the same server.
//
// Why: node:http's per-request machinery (llhttp's callbacks into JS, the
// IncomingMessage and ServerResponse streams, header objects, the outgoing
// message's own buffering) costs about 0.035 ms of CPU per small request on
// these machines, more than everything else a gateway call spends once the
// engine call is local (docs/gateway/performance.md, "A lean HTTP/1.1 front").
//
// How: the front takes over the server's connection listener. While a
// connection's requests are all plain, complete ones (http1-head.ts's subset,
// head and body already received, or the body within BODY_WAIT_MS) that the
// handler accepts, it serves them itself: one parse of the head, the body as a
// Buffer, the reply written with one write. At the first request that is not
// (a partial head, an unusual field, another route, a body still arriving), it
// hands the connection, with every byte of that request onwards, to node:http
// for good, exactly as if node:http had accepted it; node:http's limits and
// timeouts then apply. A connection is handed over only between requests, so
// replies never overtake each other. While a connection is ours, the front
// keeps node:http's limits itself (http1-connection.ts): the keep-alive
// timeout between requests, and the headers timeout, counted as node:http
// counts it, for a connection that sends nothing and for a head queued behind
// a request in progress.
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Http1FrontOptions, Http1Handler } from './http1-handler.ts';
import { Connection, type ConnectionOwner } from './http1-connection.ts';
import { log } from '../../common/logger.ts';

export type { Http1Reply } from './http1-reply.ts';
export type { Http1FrontOptions, Http1Handler, Http1Request } from './http1-handler.ts';

/** node:http's own reply to a late head when the server has no 'clientError' listener (_http_server.js). */
const REQUEST_TIMEOUT_REPLY = 'HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n';

type Listener = (socket: Socket) => void;

export class Http1Front implements ConnectionOwner {
  readonly stats = { served: 0, handedOff: 0, headTimeouts: 0 }; // for tests and the bench
  private readonly open = new Set<Connection>();
  private readonly nodeListener: Listener;
  /** Set by closeIdle()/closeAll(): every reply from now on closes its connection. */
  closing = false;

  /**
   * The front on `server` (before it listens), or undefined, with a warning, when node:http's connection
   * listener is not the one listener it expects (a Node whose http server differs): node:http then serves all.
   */
  static attach(server: Server, handler: Http1Handler, options: Http1FrontOptions): Http1Front | undefined {
    const n = server.listenerCount('connection');
    if (n !== 1) {
      log.warn(
        `HTTP/1.1 front off: node:http's server has ${n} connection listeners where 1 was expected (Node ${process.version}); node:http reads every request`,
      );
      return undefined;
    }
    return new Http1Front(server, handler, options);
  }

  private constructor(
    private readonly server: Server,
    readonly handler: Http1Handler,
    readonly options: Http1FrontOptions,
  ) {
    this.nodeListener = (server.listeners('connection') as Listener[])[0]!;
    server.removeListener('connection', this.nodeListener);
    server.on('connection', (socket: Socket) => {
      if (this.closing) return this.nodeListener.call(server, socket);
      const c = new Connection(this, socket);
      this.open.add(c);
    });
  }

  /** node:http takes the socket from here on; `pending` (the bytes not yet read by anyone) go first. */
  handOff(socket: Socket, pending: Buffer): void {
    this.stats.handedOff++;
    this.nodeListener.call(this.server, socket);
    if (pending.length > 0) socket.emit('data', pending);
    if (socket.isPaused()) socket.resume();
  }

  /**
   * A head came too late on a connection the front holds: what node:http does at its headersTimeout (socketOnError
   * with ERR_HTTP_REQUEST_TIMEOUT): the server's 'clientError' listeners answer, or, with none, node:http's bare 408
   * and the close. The connection has let go of the socket already.
   */
  headersTimedOut(socket: Socket): void {
    this.stats.headTimeouts++;
    const err = Object.assign(new Error('Request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' });
    if (this.server.emit('clientError', err, socket)) return;
    if (socket.writable) socket.write(REQUEST_TIMEOUT_REPLY);
    socket.destroy();
  }

  /** The connection let go of its socket (handed over, closed or destroyed). */
  forget = (c: Connection): boolean => this.open.delete(c);

  /** As server.closeIdleConnections(): from now on every reply closes its connection; idle ones close now. */
  closeIdle(): void {
    this.closing = true;
    for (const c of this.open) c.closeIfIdle();
  }

  /** As server.closeAllConnections(). */
  closeAll(): void {
    this.closing = true;
    for (const c of [...this.open]) c.destroy();
  }

  /** The connections the front holds now. */
  get connections(): number {
    return this.open.size;
  }
}
