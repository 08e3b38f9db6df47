// The client end of the local channel (docs/engine/local-channel.md): unary
// ModelInfer to a colocated engine over its `--local-socket` Unix socket,
// without HTTP/2. TritonGrpcClient sends ModelInfer here while the channel
// is open and over gRPC otherwise: while connecting, when the socket is
// missing, when the engine refuses the handshake (another protocol version)
// or after the connection dropped; it tries again `retryMs` later.
//
// Failures are errors shaped like grpc-js's (code, details), from the
// engine's ERROR frames (the status its gRPC path would have answered) or
// made here as grpc-js makes them: DEADLINE_EXCEEDED at the deadline (and a
// CANCEL to the engine), UNAVAILABLE for a call in flight on a connection
// that dropped.
//
// Flow control: while more than LOCAL_MAX_UNSENT_REQUEST_BYTES are unsent
// (an engine that stopped reading), usable() says no and calls take gRPC.
//
// Ownership: one instance owns its socket; close() ends it. Writes are
// coalesced per event-loop turn (local-frame-writer.ts). Event loop only.
import net from 'node:net';
import {
  decodeError,
  decodeWelcome,
  encodeFrame,
  encodeHello,
  FrameType,
  frameTypeName,
  LOCAL_VERSION,
  LocalFrameReader,
  REQUEST_FIELDS_BYTES,
  requestHead,
} from './local-channel.ts';
import { LocalFrameWriter } from './local-frame-writer.ts';
import { GrpcStatus, GrpcText } from '../../protocol/grpc-status.ts';
import { grpcError } from '../h2/grpc-direct-unary.ts';

export interface LocalChannelOptions {
  /** Sent in HELLO as a gRPC call's metadata would be (the engine's --grpc-restricted-protocol keys). */
  metadata?: Record<string, string>;
  /** Wait before trying again after the socket was missing, refused us or dropped (ms, default 1000). */
  retryMs?: number;
  /** State changes worth a log line (open, refused, dropped). */
  log?: (msg: string) => void;
}

/** A REQUEST's fields before its message, at most (a traceparent is under 64 KiB). */
const REQUEST_HEAD_MAX = REQUEST_FIELDS_BYTES + 0xffff;

/**
 * Unsent REQUEST bytes (socket buffer plus queued batch) above which new calls go over gRPC:
 * an engine that stopped reading (its own flow control) does not make the gateway buffer without limit.
 */
export const LOCAL_MAX_UNSENT_REQUEST_BYTES = 4 * 1024 * 1024;

/** Largest RESPONSE taken (the gRPC client's receive limit is none either). */
const MAX_RESPONSE_BYTES = 0xffffffff;

interface Pending {
  resolve(b: Buffer): void;
  reject(e: Error): void;
  timer: NodeJS.Timeout | undefined;
}

type State = 'idle' | 'connecting' | 'open';

export class LocalInferChannel {
  private state: State = 'idle';
  private sock: net.Socket | undefined;
  private writer: LocalFrameWriter | undefined;
  private reader: LocalFrameReader | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private retryAt = 0;
  private maxRequestBytes = 0;
  private closed = false;
  /** The last failure logged (a socket still missing is not logged at every retry). */
  private lastWhy: string | undefined;
  private readonly retryMs: number;
  /** Calls sent over this channel (tests and benches check which path carried them). */
  calls = 0;

  constructor(
    readonly path: string,
    private readonly opts: LocalChannelOptions = {},
  ) {
    this.retryMs = opts.retryMs ?? 1000;
    this.connect();
  }

  /** True when a ModelInferRequest of `bytes` can go over the channel now; else (re)connects if due, and the caller uses gRPC. */
  usable(bytes: number): boolean {
    if (this.state === 'open')
      return bytes + REQUEST_HEAD_MAX <= this.maxRequestBytes && this.unsentBytes <= LOCAL_MAX_UNSENT_REQUEST_BYTES;
    if (this.state === 'idle' && !this.closed && Date.now() >= this.retryAt) this.connect();
    return false;
  }

  /** REQUEST bytes not yet taken by the kernel. */
  get unsentBytes(): number {
    return (this.sock?.writableLength ?? 0) + (this.writer?.queued ?? 0);
  }

  /** Send one serialized ModelInferRequest; resolves with the ModelInferResponse bytes. Only after usable() said true. */
  call(message: Uint8Array, timeoutMs: number | undefined, traceparent: string | undefined): Promise<Buffer> {
    const w = this.writer;
    if (this.state !== 'open' || !w) return Promise.reject(grpcError(GrpcStatus.UNAVAILABLE, GrpcText.NO_CONNECTION));
    const id = this.nextId;
    this.nextId = id >= 0xffffffff ? 1 : id + 1;
    this.calls++;
    return new Promise<Buffer>((resolve, reject) => {
      const p: Pending = { resolve, reject, timer: undefined };
      if (timeoutMs) p.timer = setTimeout(() => this.expire(id), timeoutMs);
      this.pending.set(id, p);
      w.push(requestHead(id, timeoutMs ?? 0, traceparent, message.length));
      w.push(message);
    });
  }

  close(): void {
    this.closed = true;
    this.drop(GrpcStatus.CANCELLED, GrpcText.CHANNEL_SHUT_DOWN);
  }

  /** The deadline passed: fail the call as grpc-js does and tell the engine to stop working on it. */
  private expire(id: number): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    p.reject(grpcError(GrpcStatus.DEADLINE_EXCEEDED, GrpcText.DEADLINE_EXCEEDED));
    this.writer?.push(encodeFrame(FrameType.CANCEL, id));
  }

  private connect(): void {
    this.state = 'connecting';
    const s = net.connect(this.path);
    this.sock = s;
    this.reader = new LocalFrameReader(MAX_RESPONSE_BYTES);
    this.writer = new LocalFrameWriter(s);
    s.unref(); // an idle channel does not keep the process alive
    s.once('connect', () => {
      this.writer?.push(encodeHello({ version: LOCAL_VERSION, metadata: this.opts.metadata ?? {} }));
    });
    s.on('data', (chunk: Buffer) => {
      if (s !== this.sock) return;
      const err = this.reader!.write(chunk, (type, id, payload) => this.onFrame(type, id, payload));
      if (err) this.fail(`protocol error from the engine: ${err}`);
    });
    s.on('error', (e: Error) => {
      if (s === this.sock) this.fail(e.message);
    });
    s.once('close', () => {
      if (s === this.sock) this.fail('connection closed');
    });
  }

  private onFrame(type: FrameType, id: number, payload: Buffer): void {
    if (type === FrameType.RESPONSE || (type === FrameType.ERROR && id !== 0)) {
      const p = this.pending.get(id);
      if (!p) return; // expired here and cancelled: the engine's answer crossed the CANCEL
      this.pending.delete(id);
      if (p.timer) clearTimeout(p.timer);
      if (type === FrameType.RESPONSE) return p.resolve(payload);
      const e = decodeError(payload);
      return typeof e === 'string' ? p.reject(grpcError(GrpcStatus.INTERNAL, e)) : p.reject(grpcError(e.code, e.message));
    }
    if (type === FrameType.ERROR) {
      const e = decodeError(payload);
      return this.fail(`the engine ended the channel: ${typeof e === 'string' ? e : e.message}`);
    }
    if (type === FrameType.WELCOME && this.state === 'connecting') {
      const w = decodeWelcome(payload);
      if (typeof w === 'string' || w.version !== LOCAL_VERSION)
        return this.fail(typeof w === 'string' ? w : `engine chose version ${w.version}`);
      this.maxRequestBytes = w.maxRequestBytes;
      this.state = 'open';
      this.lastWhy = undefined;
      this.opts.log?.(`local channel to the engine open at ${this.path}`);
      return;
    }
    this.fail(`unexpected ${frameTypeName(type)} frame from the engine`);
  }

  /** The connection is unusable: its calls fail UNAVAILABLE (as on a dropped HTTP/2 connection); gRPC carries calls until the retry. */
  private fail(why: string): void {
    const again = why === this.lastWhy;
    this.lastWhy = why;
    if (again && this.state !== 'open') return this.down(why);
    if (this.state === 'open')
      this.opts.log?.(`local channel to the engine at ${this.path} lost (${why}); using gRPC, trying again in ${this.retryMs} ms`);
    else if (this.state === 'connecting')
      this.opts.log?.(`local channel to the engine at ${this.path} not available (${why}); using gRPC, trying again in ${this.retryMs} ms`);
    this.down(why);
  }

  private down(why: string): void {
    this.retryAt = Date.now() + this.retryMs;
    this.drop(GrpcStatus.UNAVAILABLE, `local channel: ${why}`);
  }

  private drop(code: number, details: string): void {
    const s = this.sock;
    this.sock = undefined;
    this.state = 'idle';
    this.writer?.discard();
    this.writer = undefined;
    this.reader = undefined;
    s?.destroy();
    for (const [id, p] of this.pending) {
      this.pending.delete(id);
      if (p.timer) clearTimeout(p.timer);
      p.reject(grpcError(code, details));
    }
  }
}
