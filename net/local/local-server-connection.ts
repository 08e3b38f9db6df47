// The server end of one local-channel connection (docs/engine/local-channel.md),
// bytes only: handshake, frames, call ids, flow control. What a call means is
// its owner's (engine/frontends/local/): it gets each REQUEST's payload and
// hands back the answer. A framing error (bad length, unknown type, a HELLO
// that is not one, garbage) is logged naming what was wrong, answered with a
// call-0 ERROR and ends this connection only; its open calls are cancelled
// as a closed gRPC stream's would be.
//
// Flow control: a client that does not read must not make the server buffer
// without limit. While a connection's unsent reply bytes (the socket's
// buffer plus the writer's queued batch) are over `maxUnsentBytes`, or
// `maxCallsInFlight` calls are open, the connection stops reading
// (socket.pause(); frames already read wait, in order, unparsed) until the
// socket drains or calls finish. Calls already accepted still complete.
//
// Ownership: owns its socket, reader, writer and the open calls' ids. Event loop only.
import type { Socket } from 'node:net';
import { log, tracer } from '../../common/logger.ts';
import {
  decodeHello,
  decodeRequest,
  encodeError,
  encodeWelcome,
  FRAME_HEADER_BYTES,
  FrameType,
  frameTypeName,
  LOCAL_VERSION,
  LocalFrameReader,
  writeHeader,
} from './local-channel.ts';
import { LocalFrameWriter } from './local-frame-writer.ts';
import { GrpcStatus } from '../../protocol/grpc-status.ts';

/** Unsent reply bytes on one connection above which it stops reading requests. */
export const LOCAL_MAX_UNSENT_BYTES = 4 * 1024 * 1024;
/** Open calls on one connection at which it stops reading requests. */
export const LOCAL_MAX_CALLS_IN_FLIGHT = 256;

export interface LocalServerConnectionOptions {
  /** Largest REQUEST payload (bytes); larger frames end the connection (the client sends those over gRPC). */
  maxRequestBytes: number;
  /** Stop reading while more reply bytes than this are unsent (LOCAL_MAX_UNSENT_BYTES by default at the listener). */
  maxUnsentBytes: number;
  /** Stop reading while this many calls are open (LOCAL_MAX_CALLS_IN_FLIGHT by default at the listener). */
  maxCallsInFlight: number;
}

/** What the connection asks of its owner. Each call is answered once, by reply(), unless cancelled first. */
export interface LocalCallSink {
  /** HELLO of our version taken: its metadata (the client's key for a restricted server, for one). */
  greeted(metadata: Record<string, string>): void;
  /** REQUEST `id` (a serialized ModelInferRequest); answer with reply(id, ...), maybe before returning. */
  request(id: number, message: Buffer, traceparent: string | undefined, timeoutMs: number): { cancel(): void };
}

/** What one connection holds now (tests and debugging: the flow-control bound is observable). */
export interface LocalConnectionStats {
  /** This connection's number in the log lines ("local channel connection N"). */
  connection: number;
  /** REQUESTs taken (read and started) on this connection so far. */
  callsAccepted: number;
  callsInFlight: number;
  /** Reply bytes not yet taken by the kernel: the socket's writableLength plus the writer's queued batch. */
  unsentBytes: number;
  /** The most unsentBytes has been, measured after each reply was queued. */
  peakUnsentBytes: number;
  /** Reading is stopped (over a limit). */
  paused: boolean;
  /** Frames read before the pause, waiting to be handled. */
  heldFrames: number;
}

interface HeldFrame {
  type: FrameType;
  id: number;
  payload: Buffer;
}

/** An open call: its owner's handle once request() returned. */
type OpenCall = { handle?: { cancel(): void } };

const trace = tracer('local');

let served = 0;
/** Calls answered with a RESPONSE over local channels in this process (tests prove the channel carried them). */
export const localCallsServed = (): number => served;

let nextConn = 1;
const live = new Set<LocalServerConnection>();
/** Every open local-channel connection's stats, in this process. */
export const localChannelConnections = (): LocalConnectionStats[] => [...live].map((c) => c.stats());

export class LocalServerConnection {
  private readonly reader: LocalFrameReader;
  private readonly writer: LocalFrameWriter;
  private readonly calls = new Map<number, OpenCall>();
  private greeted = false;
  private closed = false;
  readonly peer: string;
  private readonly num = nextConn++;
  private paused = false;
  private held: HeldFrame[] = [];
  private heldAt = 0;
  private resumeScheduled = false;
  private peakUnsent = 0;
  private accepted = 0;

  constructor(
    private readonly socket: Socket,
    private readonly opts: LocalServerConnectionOptions,
    private readonly sink: LocalCallSink,
    private readonly onGone: () => void,
  ) {
    this.peer = `local channel connection ${this.num}`;
    this.reader = new LocalFrameReader(opts.maxRequestBytes);
    this.writer = new LocalFrameWriter(socket);
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    // Errors always come with a 'close' (handled there); traced, not thrown.
    socket.on('error', (e: Error) => trace(`${this.peer}: ${e.message}`));
    socket.once('close', () => this.gone());
    socket.on('drain', () => this.scheduleResume());
    live.add(this);
  }

  stats(): LocalConnectionStats {
    return {
      connection: this.num,
      callsAccepted: this.accepted,
      callsInFlight: this.calls.size,
      unsentBytes: this.unsent(),
      peakUnsentBytes: this.peakUnsent,
      paused: this.paused,
      heldFrames: this.held.length - this.heldAt,
    };
  }

  /** Close now (server stopping): open calls are cancelled. */
  close(): void {
    this.socket.destroy();
    this.gone();
  }

  /** Answer call `id` with a RESPONSE (`body`: the serialized ModelInferResponse) or an ERROR. */
  reply(id: number, code: number, details: string, body?: Buffer): void {
    if (!this.calls.delete(id) || this.closed) return;
    if (body === undefined) this.writer.push(encodeError(id, code, details));
    else {
      served++;
      const head = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
      writeHeader(head, 0, FrameType.RESPONSE, id, body.length);
      this.writer.push(head);
      this.writer.push(body);
    }
    const unsent = this.unsent();
    if (unsent > this.peakUnsent) this.peakUnsent = unsent;
    if (this.paused) this.scheduleResume();
    else if (unsent > this.opts.maxUnsentBytes) this.pause();
  }

  private onData(chunk: Buffer): void {
    const err = this.reader.write(chunk, (type, id, payload) => this.onFrame(type, id, payload));
    if (err) this.protocolError(err);
  }

  /** Handle a frame now, or hold it (in order) while reading is paused. */
  private onFrame(type: FrameType, id: number, payload: Buffer): void {
    if (this.paused) {
      this.held.push({ type, id, payload });
      return;
    }
    this.handle(type, id, payload);
    if (this.full()) this.pause();
  }

  private unsent(): number {
    return this.socket.writableLength + this.writer.queued;
  }

  private full(): boolean {
    return this.calls.size >= this.opts.maxCallsInFlight || this.unsent() > this.opts.maxUnsentBytes;
  }

  /** Stop reading; `again`: already stopped while its held frames were being handled. */
  private pause(again = false): void {
    if ((this.paused && !again) || this.closed) return;
    this.paused = true;
    this.socket.pause();
    // The queued batch may be taken whole by the kernel (no 'drain' then): look again after it is written.
    this.scheduleResume();
    trace(`${this.peer}: reading paused (${this.calls.size} calls open, ${this.unsent()} reply bytes unsent)`);
  }

  /** Later, not inside a reply (which may come from handling a held frame). */
  private scheduleResume(): void {
    if (!this.paused || this.resumeScheduled) return;
    this.resumeScheduled = true;
    setImmediate(() => {
      this.resumeScheduled = false;
      this.resume();
    });
  }

  /** Under both limits again: handle the held frames, then read again (unless a limit is reached first). */
  private resume(): void {
    if (!this.paused || this.closed) return;
    // Bytes still queued in the writer: look again once its batch is written. Over the limit in the
    // socket's buffer (past its highWaterMark, so write() said false): 'drain' calls back.
    if (this.unsent() > this.opts.maxUnsentBytes) return this.writer.queued ? this.scheduleResume() : undefined;
    if (this.calls.size >= this.opts.maxCallsInFlight) return; // a reply calls back
    this.paused = false;
    while (this.heldAt < this.held.length) {
      const f = this.held[this.heldAt++]!;
      this.handle(f.type, f.id, f.payload);
      if (this.closed) return;
      if (this.paused || this.full()) return this.pause(true);
    }
    this.held = [];
    this.heldAt = 0;
    trace(`${this.peer}: reading resumed`);
    this.socket.resume();
  }

  private handle(type: FrameType, id: number, payload: Buffer): void {
    if (!this.greeted)
      return type === FrameType.HELLO ? this.onHello(payload) : this.protocolError(`expected HELLO first, got ${frameTypeName(type)}`);
    switch (type) {
      case FrameType.REQUEST:
        return this.onRequest(id, payload);
      case FrameType.CANCEL: {
        const c = this.calls.get(id);
        this.calls.delete(id);
        c?.handle?.cancel();
        return;
      }
      default:
        return this.protocolError(`unexpected ${frameTypeName(type)} frame from a client`);
    }
  }

  private onHello(payload: Buffer): void {
    const h = decodeHello(payload);
    if (typeof h === 'string') return this.protocolError(h);
    if (h.version !== LOCAL_VERSION) {
      return this.refuse(
        GrpcStatus.UNIMPLEMENTED,
        `local channel protocol version ${h.version} is not supported (this engine speaks ${LOCAL_VERSION})`,
      );
    }
    this.greeted = true;
    this.sink.greeted(h.metadata);
    this.writer.push(encodeWelcome(LOCAL_VERSION, this.opts.maxRequestBytes));
  }

  private onRequest(id: number, payload: Buffer): void {
    if (id === 0 || this.calls.has(id))
      return this.protocolError(`REQUEST with call id ${id}, ${id === 0 ? 'reserved for the connection' : 'already in flight'}`);
    const f = decodeRequest(payload);
    if (typeof f === 'string') return this.protocolError(f);
    const call: OpenCall = {};
    this.accepted++;
    this.calls.set(id, call);
    call.handle = this.sink.request(id, f.message, f.traceparent, f.timeoutMs);
  }

  /** A HELLO this server will not take: say why (call 0), then close. */
  private refuse(code: number, message: string): void {
    log.warn(`${this.peer}: ${message}`);
    this.endWith(code, message);
  }

  private protocolError(what: string): void {
    if (this.closed) return;
    log.warn(`${this.peer}: closing on a protocol error: ${what}`);
    this.endWith(GrpcStatus.INTERNAL, `local channel protocol error: ${what}`);
  }

  private endWith(code: number, message: string): void {
    this.reader.stop(message);
    this.writer.push(encodeError(0, code, message));
    this.writer.flush();
    this.socket.end();
    this.gone();
  }

  private gone(): void {
    if (this.closed) return;
    this.closed = true;
    live.delete(this);
    this.held = [];
    this.heldAt = 0;
    this.writer.discard();
    this.reader.stop('connection closed');
    // As a gRPC stream closed before its answer: every open call's request is cancelled.
    for (const c of this.calls.values()) c.handle?.cancel();
    this.calls.clear();
    this.onGone();
  }
}
