// One connection the HTTP/1.1 front holds (http1-front.ts): its bytes, the
// request in progress, and node:http's limits kept while the connection is
// the front's. Not exported beyond net/http1/.
//
// Timers, each as node:http counts it: the keep-alive timeout (socket idle
// between requests, a silent close); the headers timeout (headersMs,
// http1-head-clock.ts); a late head gets the server's 408
// (Http1Front.headersTimedOut), as node:http answers one, even while a
// request is in progress. A partial head
// that starts a connection or follows an idle gap goes to node:http at once,
// whose headersTimeout then counts from that byte, as it would have; one read
// behind a request just served (a pipelined batch cut inside a head) is waited
// for and timed here.
import type { Socket } from 'node:net';
import { readHead, subsetPrefix, type Http1Head } from './http1-head.ts';
import { HeadClock } from './http1-head-clock.ts';
import { replyText, writeReply, type Http1Reply } from './http1-reply.ts';
import { PIPELINE_PER_TURN, type Http1FrontOptions, type Http1Handler } from './http1-handler.ts';
import { log } from '../../common/logger.ts';

/** How long a body that did not come with its head may take before node:http gets the request. */
export const BODY_WAIT_MS = 1000;
/** Bytes buffered behind a request in progress (pipelining) before reading stops. */
const PIPELINE_BUFFER = 64 * 1024;

/** What a connection needs of the front that owns it (Http1Front). */
export interface ConnectionOwner {
  readonly handler: Http1Handler;
  readonly options: Http1FrontOptions;
  readonly stats: { served: number };
  /** Every reply from now on closes its connection. */
  readonly closing: boolean;
  /** node:http takes the socket, `pending` first. */
  handOff(socket: Socket, pending: Buffer): void;
  /** The connection let go of its socket. */
  forget(c: Connection): boolean;
  /** A head came too late: the server's 408 and the close (the connection has let go already). */
  headersTimedOut(socket: Socket): void;
}

/** Owned by its Http1Front; runs on the event loop, one request at a time, in the order they arrived. */
export class Connection {
  private pending: Buffer = Buffer.alloc(0);
  private busy = false;
  /** While busy: the bytes of `pending` that are the request in progress (the next head starts after them). */
  private inFlightBytes = 0;
  /** Times the head being waited for (node:http's headersTimeout). */
  private readonly headClock: HeadClock;
  /** `pending` up to here (past the request in progress) is known to be whole keep-alive requests of the subset. */
  private subsetTo = 0;
  private gone = false;
  private bodyTimer: NodeJS.Timeout | undefined;
  /** Listeners of the request in progress for a close before its reply (Http1Request.onClose). */
  private closeWatchers: (() => void)[] = [];
  private readonly onData = (d: Buffer) => this.data(d);
  private readonly onEnd = () => this.ended();
  private readonly onError = () => this.destroy();
  private readonly onClose = () => this.closed();
  // The keep-alive timeout is armed once and counts from the socket's last read or write (net.Socket refreshes it on
  // each); while a request is in progress it does not apply (node:http clears it then), so a firing is ignored and the
  // reply's write arms it again. One timer per connection, not two timer changes per request.
  private readonly onTimeout = () => {
    if (!this.busy) this.destroy();
  };
  private idleArmed = false;
  private readonly onDrain = () => {
    this.waitingDrain = false;
    this.next();
  };
  /** A reply is still queued past the socket's high-water mark (the client is not reading): no new request starts. */
  private waitingDrain = false;
  /** Requests served from bytes already read, one after another, since the connection last waited for the socket. */
  private pipelined = 0;
  /** The bytes in `pending` followed a request just served (from the same batch, not after an idle gap). */
  private afterServed = false;
  /** A turn of the event loop is being yielded to other sockets before the next pipelined request starts. */
  private yielding = false;
  private readonly pipelinePerTurn: number;
  private readonly onTurn = () => {
    this.yielding = false;
    this.next();
  };
  private peerEnded = false;

  constructor(
    private readonly front: ConnectionOwner,
    private readonly socket: Socket,
  ) {
    this.pipelinePerTurn = front.options.pipelinePerTurn ?? PIPELINE_PER_TURN;
    socket.on('data', this.onData);
    socket.on('end', this.onEnd);
    socket.on('error', this.onError);
    socket.on('close', this.onClose);
    socket.on('timeout', this.onTimeout);
    // node:http counts a connection's first head from the connection's start: one that stays silent gets the 408.
    this.headClock = new HeadClock(front.options.headersMs, () => this.headTimedOut());
    this.headClock.start();
  }

  private data(d: Buffer): void {
    this.pending = this.pending.length === 0 ? d : Buffer.concat([this.pending, d]);
    if (this.busy || this.waitingDrain || this.yielding) {
      // Requests behind one in progress, or behind replies the client has not read: bounded, then reading stops.
      if (this.pending.length > PIPELINE_BUFFER) this.socket.pause();
      this.watchHead();
      return;
    }
    this.next();
  }

  /** Times the head queued behind the request in progress (or behind unread replies), as node:http reads them as they come. */
  private watchHead(): void {
    this.headClock.watch(this.pending, this.busy ? this.inFlightBytes : 0);
  }

  /** The head waited for is late: the connection is let go and the server answers 408, as node:http would. */
  private headTimedOut(): void {
    if (this.gone) return;
    this.detach(true);
    this.front.headersTimedOut(this.socket);
    this.cancelled();
  }

  /** Serve, wait for, or hand off what `pending` starts with; called whenever the connection is not busy. */
  private next(): void {
    if (this.gone || this.busy || this.yielding) return;
    if (this.socket.writableNeedDrain) {
      if (!this.waitingDrain) {
        this.waitingDrain = true;
        this.socket.once('drain', this.onDrain);
      }
      this.watchHead();
      return;
    }
    if (this.pending.length === 0) {
      this.pipelined = 0;
      this.afterServed = false;
      if (this.peerEnded) return void this.socket.end();
      if (this.socket.isPaused()) this.socket.resume();
      return;
    }
    const head = readHead(this.pending);
    if (head === 'partial' && this.afterServed && !this.peerEnded && subsetPrefix(this.pending) === 0) {
      // A pipelined batch whose read ended inside a head (its reads end anywhere): the rest is on its way, so the
      // front waits for it rather than give node:http the connection and the rest of the batch. Timed as node:http
      // would (watchHead: headersMs, then its 408). A head that starts a connection or follows an idle gap is
      // node:http's at once, as before.
      this.socket.setTimeout(0);
      this.idleArmed = false;
      if (this.socket.isPaused()) this.socket.resume();
      this.watchHead();
      return;
    }
    if (head === 'partial' || head === undefined || head.contentLength > this.front.handler.maxBody) return this.handOff();
    const route = this.front.handler.accepts(head);
    if (route === undefined) return this.handOff();
    this.headClock.clear();
    const total = head.headBytes + head.contentLength;
    // Bytes after this request outside the subset (garbage behind a short Content-Length, a bad pipelined request,
    // anything after Connection: close):
    // node:http reads from here on, so every answer is the one node:http gives (issue 41).
    if (this.pending.length > total) {
      if (!head.keepAlive) return this.handOff();
      const from = Math.max(total, this.subsetTo);
      if (from < this.pending.length) {
        const checked = subsetPrefix(this.pending.subarray(from));
        if (checked < 0) return this.handOff();
        this.subsetTo = from + checked;
      }
    }
    if (this.pending.length < total) {
      if (this.peerEnded) return this.handOff();
      this.bodyTimer ??= setTimeout(() => this.handOff(), BODY_WAIT_MS);
      // Reading may have stopped behind pipelined requests, with the rest of this body already sent.
      if (this.socket.isPaused()) this.socket.resume();
      return;
    }
    this.clearBodyTimer();
    this.busy = true;
    this.inFlightBytes = total;
    this.headClock.rescan();
    this.watchHead();
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
    this.subsetTo = Math.max(0, this.subsetTo - total);
    this.afterServed = this.pending.length > 0;
    this.headClock.rescan();
    this.front.stats.served++;
    const keepAlive = head.keepAlive && !this.front.closing && reply.headers.connection !== 'close';
    const text = replyText(reply, head.keepAlive && !this.front.closing, this.front.options.idleMs);
    writeReply(this.socket, text, reply.body);
    if (!keepAlive) {
      this.detach(true);
      // As node:http after a reply with Connection: close: end, and destroy once the reply is out.
      this.socket.destroySoon();
      return;
    }
    if (!this.idleArmed) {
      this.idleArmed = true;
      this.socket.setTimeout(this.front.options.idleMs);
    }
    // A client that pipelined many requests in one write: after a turn's worth, other sockets get the event loop
    // (a handler that answers without waiting on I/O would otherwise serve the whole batch in one turn).
    if (this.pending.length > 0 && ++this.pipelined >= this.pipelinePerTurn) {
      this.pipelined = 0;
      this.yielding = true;
      setImmediate(this.onTurn);
      return;
    }
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
    this.headClock.clear();
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
