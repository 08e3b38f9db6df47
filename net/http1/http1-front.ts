// over 300 lines: past 300 only since the formatter wrapped its long lines (issue 38); to be split
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
// keeps node:http's idle limits: the keep-alive timeout between requests, the
// headers timeout before the first byte.
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { readHead, restInSubset, type Http1Head } from './http1-head.ts';
import { replyText, type Http1Reply } from './http1-reply.ts';
import { log } from '../../common/logger.ts';

export type { Http1Reply } from './http1-reply.ts';

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
  /** node:http's headersTimeout: how long a new connection may stay silent (ms). */
  headersMs: number;
}

/** How long a body that did not come with its head may take before node:http gets the request. */
export const BODY_WAIT_MS = 1000;
/** Bytes buffered behind a request in progress (pipelining) before reading stops. */
const PIPELINE_BUFFER = 64 * 1024;

type Listener = (socket: Socket) => void;

export class Http1Front {
  readonly stats = { served: 0, handedOff: 0 }; // for tests and the bench
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

class Connection {
  private pending: Buffer = Buffer.alloc(0);
  private busy = false;
  private gone = false;
  private bodyTimer: NodeJS.Timeout | undefined;
  /** Listeners of the request in progress for a close before its reply (Http1Request.onClose). */
  private closeWatchers: (() => void)[] = [];
  private readonly onData = (d: Buffer) => this.data(d);
  private readonly onEnd = () => this.ended();
  private readonly onError = () => this.destroy();
  private readonly onClose = () => this.closed();
  private readonly onTimeout = () => this.destroy();
  private readonly onDrain = () => {
    this.waitingDrain = false;
    this.next();
  };
  /** A reply is still queued past the socket's high-water mark (the client is not reading): no new request starts. */
  private waitingDrain = false;
  private peerEnded = false;

  constructor(
    private readonly front: Http1Front,
    private readonly socket: Socket,
  ) {
    socket.on('data', this.onData);
    socket.on('end', this.onEnd);
    socket.on('error', this.onError);
    socket.on('close', this.onClose);
    socket.on('timeout', this.onTimeout);
    socket.setTimeout(front.options.headersMs);
  }

  private data(d: Buffer): void {
    this.pending = this.pending.length === 0 ? d : Buffer.concat([this.pending, d]);
    if (this.busy || this.waitingDrain) {
      // Requests behind one in progress, or behind replies the client has not read: bounded, then reading stops.
      if (this.pending.length > PIPELINE_BUFFER) this.socket.pause();
      return;
    }
    this.next();
  }

  /** Serve, wait for, or hand off what `pending` starts with; called whenever the connection is not busy. */
  private next(): void {
    if (this.gone || this.busy) return;
    if (this.socket.writableNeedDrain) {
      if (!this.waitingDrain) {
        this.waitingDrain = true;
        this.socket.once('drain', this.onDrain);
      }
      return;
    }
    if (this.pending.length === 0) {
      if (this.peerEnded) return void this.socket.end();
      if (this.socket.isPaused()) this.socket.resume();
      return;
    }
    const head = readHead(this.pending);
    if (head === 'partial' || head === undefined || head.contentLength > this.front.handler.maxBody) return this.handOff();
    const route = this.front.handler.accepts(head);
    if (route === undefined) return this.handOff();
    const total = head.headBytes + head.contentLength;
    // Bytes after this request outside the subset (garbage behind a short Content-Length, a bad pipelined request,
    // anything after Connection: close):
    // node:http reads from here on, so every answer is the one node:http gives (issue 41).
    if (this.pending.length > total && (!head.keepAlive || !restInSubset(this.pending.subarray(total)))) return this.handOff();
    if (this.pending.length < total) {
      if (this.peerEnded) return this.handOff();
      this.bodyTimer ??= setTimeout(() => this.handOff(), BODY_WAIT_MS);
      return;
    }
    this.clearBodyTimer();
    this.socket.setTimeout(0);
    this.busy = true;
    const body = this.pending.subarray(head.headBytes, total);
    this.front.handler.serve({ head, route, body, onClose: (l) => this.closeWatchers.push(l) }).then(
      (reply) => this.answer(head, total, reply),
      (e: unknown) => {
        // Only a bug gets here (a handler answers its own errors): log it, drop the connection.
        log.error(`${head.method} ${head.target}: the HTTP/1.1 front's handler failed`, e);
        this.busy = false;
        this.destroy();
      },
    );
  }

  private answer(head: Http1Head, total: number, reply: Http1Reply | undefined): void {
    this.busy = false;
    this.closeWatchers = [];
    if (this.gone) return;
    if (!reply) return this.handOff();
    this.pending = this.pending.subarray(total);
    this.front.stats.served++;
    const keepAlive = head.keepAlive && !this.front.closing && reply.headers.connection !== 'close';
    const text = replyText(reply, head.keepAlive && !this.front.closing, this.front.options.idleMs);
    if (typeof reply.body === 'string') this.socket.write(text);
    else {
      // One writev for the head and the body's bytes.
      this.socket.cork();
      this.socket.write(text, 'latin1');
      this.socket.write(reply.body);
      this.socket.uncork();
    }
    if (!keepAlive) {
      this.detach(true);
      // As node:http after a reply with Connection: close: end, and destroy once the reply is out.
      this.socket.destroySoon();
      return;
    }
    this.socket.setTimeout(this.front.options.idleMs);
    this.next();
  }

  private handOff(): void {
    if (this.gone || this.busy) return;
    this.detach(false);
    // Bytes a paused socket buffered (read() emits 'data' too: the front's listener is gone by now).
    const rest: Buffer[] = [this.pending];
    for (let chunk: Buffer | null; (chunk = this.socket.read() as Buffer | null) !== null; ) rest.push(chunk);
    this.socket.setTimeout(0);
    this.front.handOff(this.socket, rest.length === 1 ? rest[0]! : Buffer.concat(rest));
    if (this.peerEnded) this.socket.emit('end');
  }

  private ended(): void {
    if (this.busy) {
      // As node:http (httpAllowHalfOpen false): the client's end aborts the request in flight (a fetch aborted by
      // its caller looks just like this), its reply is not written, and the connection ends.
      this.detach(true);
      this.socket.end();
      this.cancelled();
      return;
    }
    this.peerEnded = true;
    this.next();
  }

  closeIfIdle(): void {
    if (!this.busy && this.pending.length === 0) this.destroy();
  }

  destroy(): void {
    this.detach(true);
    this.socket.destroy();
    this.cancelled();
  }

  private closed(): void {
    this.detach(true);
    this.cancelled();
  }

  /** The connection is gone: the request in progress, if any, will get no reply. */
  private cancelled(): void {
    const watchers = this.closeWatchers;
    this.closeWatchers = [];
    for (const l of watchers) l();
  }

  private clearBodyTimer(): void {
    if (this.bodyTimer) clearTimeout(this.bodyTimer);
    this.bodyTimer = undefined;
  }

  /** The front lets go of the socket: no listener of its own is left on it (but a silent error listener when nobody takes it over). */
  private detach(silenceErrors: boolean): void {
    if (this.gone) return;
    this.gone = true;
    this.clearBodyTimer();
    this.front.forget(this);
    const s = this.socket;
    s.off('data', this.onData);
    s.off('end', this.onEnd);
    s.off('close', this.onClose);
    s.off('timeout', this.onTimeout);
    s.off('drain', this.onDrain);
    s.off('error', this.onError);
    // An error after the front let go (a reset while a Connection: close reply drains) has nobody else to hear it.
    if (silenceErrors) s.on('error', () => undefined);
  }
}
