// Bounds on the calls a gateway runs at once (issue 41): per connection and
// per gateway, on both HTTP/1.1 fronts.
//
// Why: node:http parses every request of a pipelined connection as soon as
// its bytes arrive and hands each to the listener at once, so one client
// writing 128,000 pipelined calls had them all in flight (engine timeouts,
// RSS ×10, other clients stalled). This class owns the counts: per
// connection, requests past `perConnection` wait in that connection's queue
// (and its socket stops being read) until an earlier one answers; past
// `perConnectionQueue` waiting they are refused. Per gateway, a /fn call past
// `total` in flight is refused at once (no global queue: a refused client
// retries; a global queue would let one flooder delay everyone). Refusals are
// 503 GATEWAY_BUSY with Retry-After. The lean front (net/http1/http1-front.ts)
// serves one request at a time per connection by design, so only the total
// applies there.
//
// Threading: main thread only; counts change in the listener and in the
// replies' finish/close handlers.
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Http1Handler, Http1Reply } from '../../net/http1/http1-front.ts';
import { gatewayError } from '../core/errors.ts';

export interface AdmissionLimits {
  /** Requests of one connection in flight at once (node:http path; the lean front serves one at a time). */
  perConnection: number;
  /**
   * Requests of one connection waiting behind those; more are refused (503). The socket is not read while any
   * wait, so this only caps what one read (or the lean front's hand-over of a pipelined backlog) already holds.
   */
  perConnectionQueue: number;
  /** /fn calls in flight in this gateway, all connections together; more are refused (503). */
  total: number;
  /** Seconds announced in Retry-After on a refusal. */
  retryAfterS: number;
}

export const DEFAULT_ADMISSION: AdmissionLimits = { perConnection: 8, perConnectionQueue: 4096, total: 1024, retryAfterS: 1 };

interface ConnectionState {
  active: number;
  queue: [IncomingMessage, ServerResponse][];
  pausedByUs: boolean;
}

/** The gateway's in-flight counts and refusals (one per gateway). */
export class CallAdmission {
  readonly limits: AdmissionLimits;
  /** /fn calls in flight now, both fronts. */
  inFlight = 0;
  /** Highest inFlight seen (tests, the soak). */
  peak = 0;
  /** Most requests of one connection seen in flight at once. */
  peakPerConnection = 0;
  readonly refused = { connection: 0, total: 0 };
  private readonly conns = new WeakMap<Socket, ConnectionState>();

  constructor(limits: Partial<AdmissionLimits> = {}) {
    this.limits = { ...DEFAULT_ADMISSION, ...limits };
  }

  /** Takes a gateway-wide slot for a /fn call; false when all are taken. */
  tryEnter(): boolean {
    if (this.inFlight >= this.limits.total) {
      this.refused.total++;
      return false;
    }
    if (++this.inFlight > this.peak) this.peak = this.inFlight;
    return true;
  }

  leave(): void {
    this.inFlight--;
  }

  /** The refusal's status, headers and body (GATEWAY_BUSY). */
  busyReply(scope: 'connection' | 'gateway'): Http1Reply & { headers: Record<string, string> } {
    const limit = scope === 'connection' ? this.limits.perConnection + this.limits.perConnectionQueue : this.limits.total;
    const body = JSON.stringify(gatewayError('GATEWAY_BUSY', { scope, limit, retryAfterS: this.limits.retryAfterS }).toJSON());
    return {
      status: 503,
      headers: {
        'content-type': 'application/json',
        'retry-after': String(this.limits.retryAfterS),
        'content-length': String(Buffer.byteLength(body)),
      },
      body,
    };
  }

  /** `inner` behind the per-connection queue and the gateway-wide count (node:http's listener). */
  listener(inner: RequestListener): RequestListener {
    return (req, res) => {
      const socket = req.socket;
      let st = this.conns.get(socket);
      if (!st) this.conns.set(socket, (st = { active: 0, queue: [], pausedByUs: false }));
      if (st.active < this.limits.perConnection) return this.start(st, socket, req, res, inner);
      if (st.queue.length >= this.limits.perConnectionQueue) {
        this.refused.connection++;
        return this.refuse(res, 'connection');
      }
      st.queue.push([req, res]);
      if (!st.pausedByUs) {
        st.pausedByUs = true;
        socket.pause();
      }
    };
  }

  /** The lean front's handler behind the gateway-wide count (every request it serves is a /fn call). */
  front<R>(h: Http1Handler<R>): Http1Handler<R> {
    return {
      maxBody: h.maxBody,
      accepts: (head) => h.accepts(head),
      serve: async (req) => {
        if (!this.tryEnter()) return this.busyReply('gateway');
        try {
          return await h.serve(req);
        } finally {
          this.leave();
        }
      },
    };
  }

  private start(st: ConnectionState, socket: Socket, req: IncomingMessage, res: ServerResponse, inner: RequestListener): void {
    const call = req.url !== undefined && req.url.startsWith('/fn/');
    if (call && !this.tryEnter()) return this.refuse(res, 'gateway');
    st.active++;
    if (st.active > this.peakPerConnection) this.peakPerConnection = st.active;
    let done = false;
    const finished = () => {
      if (done) return;
      done = true;
      res.off('finish', finished);
      res.off('close', finished);
      if (call) this.leave();
      st.active--;
      this.next(st, socket, inner);
    };
    res.on('finish', finished);
    res.on('close', finished);
    inner(req, res);
  }

  private next(st: ConnectionState, socket: Socket, inner: RequestListener): void {
    while (st.active < this.limits.perConnection && st.queue.length > 0) {
      const [req, res] = st.queue.shift()!;
      if (res.destroyed || req.destroyed) continue; // the connection went while it waited
      this.start(st, socket, req, res, inner);
    }
    if (st.queue.length === 0 && st.pausedByUs) {
      st.pausedByUs = false;
      if (!socket.destroyed) socket.resume();
    }
  }

  private refuse(res: ServerResponse, scope: 'connection' | 'gateway'): void {
    const r = this.busyReply(scope);
    res.writeHead(r.status, r.headers);
    res.end(r.body);
  }
}
