// over 300 lines: one connection's state machine; every frame type's handler reads and writes the same private state (streams, windows, the header block in progress, the guards), which a split would have to expose
// The server side of one HTTP/2 connection (RFC 9113), ours rather than
// node:http2's, for the engine's gRPC port (docs/engine/h2-front.md: why, and
// what it costs per call against node:http2). It keeps the streams, the
// settings and both directions' flow control, and hands each new stream to
// `onStream`. Not done: server push, priorities (ignored, as RFC 9113
// allows), TLS (the socket is plain), h2c upgrade from HTTP/1.1.
//
// Errors: a peer breaking the protocol gets a GOAWAY naming the error and
// the connection closes; a stream-level fault resets that stream only; each
// answered as RFC 9113 and RFC 7541 say (docs/engine/h2-front.md#conformance-and-defences
// lists the tests). What a peer can make it spend is bounded by H2Limits
// (h2-limits.ts). Every stream still open when the connection goes is closed
// as aborted.
import type { Socket } from 'node:net';
import {
  DEFAULT_MAX_FRAME,
  DEFAULT_WINDOW,
  Flag,
  FRAME_HEADER_BYTES,
  FrameType,
  goawayFrame,
  H2Error,
  MAX_WINDOW,
  putFrameHeader,
  rstStreamFrame,
  Setting,
  settingsFrame,
  windowUpdateFrame,
} from './h2-frames.ts';
import { H2Stream, type StreamOwner } from './h2-stream.ts';
import { FrameReader, unpad } from './h2-frame-reader.ts';
import { HeaderDecoder, toHeaders } from './h2-header-decoder.ts';
import { declaredLength, requestFault, trailersFault } from './h2-request-check.ts';
import { ClosedStreams, ResetBudget } from './h2-guards.ts';
import { DEFAULT_H2_LIMITS, type H2Limits } from './h2-limits.ts';

export interface H2ServerOptions {
  /** Largest frame we accept (advertised as SETTINGS_MAX_FRAME_SIZE). */
  maxFrameSize: number;
  /** Our receive window per stream (SETTINGS_INITIAL_WINDOW_SIZE) and for the connection. */
  streamWindow: number;
  connectionWindow: number;
  /** What one peer may make the connection spend (h2-limits.ts); defaults where not given. */
  limits?: Partial<H2Limits>;
}

/** A flag bit no frame uses, marking a header block whose stream depends on itself. */
const SELF_DEPENDENT = 0x100;
/** Socket bytes queued past which a control-frame reply counts as queued behind a peer that does not read. */
const CONTROL_SLACK = 64 << 10;

/** Owns the socket, its streams and the HPACK decoding state; single-threaded. */
export class H2ServerConnection implements StreamOwner {
  private readonly streams = new Map<number, H2Stream>();
  private readonly blocked = new Set<H2Stream>();
  private readonly limits: H2Limits;
  private readonly decoder: HeaderDecoder;
  private readonly reader: FrameReader;
  private readonly resets: ResetBudget;
  private readonly closedStreams = new ClosedStreams();
  private readonly idle: NodeJS.Timeout | undefined;
  private lastStreamId = 0;
  /** A header block being assembled from HEADERS + CONTINUATION. */
  private block: { stream: number; flags: number; parts: Buffer[]; bytes: number; frames: number } | undefined;
  /** Control-frame replies written while the socket already held CONTROL_SLACK unsent bytes. */
  private queuedControl = 0;
  /** PING and SETTINGS frames to answer since the last HEADERS or DATA (limits.maxControlWithoutData). */
  private controlWithoutData = 0;
  peerMaxFrame = DEFAULT_MAX_FRAME;
  private peerInitialWindow = DEFAULT_WINDOW;
  private sendWindow = DEFAULT_WINDOW;
  private recvWindow: number;
  private recvCredit = 0;
  private goingAway = false;
  private dead = false;
  private corked = false;
  /** Why the connection was dropped without a GOAWAY (a peer that does not read), for tests and logs. */
  dropped = '';
  /** Why the connection was cut with GOAWAY ENHANCE_YOUR_CALM (a flood), for the front's reconnect penalty. */
  calmed = '';
  /** Largest header block (HEADERS and its CONTINUATIONs), compressed: four times the decoded list's bound. */
  private readonly maxBlockBytes: number;

  constructor(
    private readonly socket: Socket,
    private readonly opts: H2ServerOptions,
    private readonly onStream: (stream: H2Stream, conn: H2ServerConnection) => void,
  ) {
    const l = (this.limits = { ...DEFAULT_H2_LIMITS, ...opts.limits });
    this.decoder = new HeaderDecoder(l.maxHeaderListBytes, l.maxHeaderFields);
    this.maxBlockBytes = 4 * l.maxHeaderListBytes;
    this.resets = new ResetBudget(l.resetBurst, l.resetsPerSecond, performance.now());
    this.recvWindow = opts.connectionWindow;
    this.reader = new FrameReader(
      opts.maxFrameSize,
      (t, f, sid, p) => this.onFrame(t, f, sid, p),
      (code, why) => this.fail(code, why),
      { frames: l.framesPerTurn, headerBytes: l.headerBytesPerTurn },
      () => this.onBacklog(),
    );
    socket.setNoDelay(true);
    this.out(
      settingsFrame([
        [Setting.MAX_FRAME_SIZE, opts.maxFrameSize],
        [Setting.INITIAL_WINDOW_SIZE, opts.streamWindow],
        [Setting.ENABLE_PUSH, 0],
        [Setting.MAX_CONCURRENT_STREAMS, l.maxConcurrentStreams],
        [Setting.MAX_HEADER_LIST_SIZE, l.maxHeaderListBytes],
      ]),
    );
    if (l.idleTimeoutMs > 0) this.idle = setTimeout(() => this.streams.size === 0 && this.shutdown(), l.idleTimeoutMs).unref();
    if (opts.connectionWindow > DEFAULT_WINDOW) this.out(windowUpdateFrame(0, opts.connectionWindow - DEFAULT_WINDOW));
    socket.on('data', (chunk: Buffer) => {
      if (!this.dead) this.reader.push(chunk, this.stopReading);
    });
    socket.on('error', () => undefined); // 'close' follows
    socket.on('close', () => this.gone());
    socket.on('drain', () => (this.queuedControl = 0));
  }

  private readonly stopReading = () => this.dead;

  /**
   * One turn's budget of frames is spent with more read: the socket stops reading (so the backlog is all that is
   * buffered) and the rest is handled a turn later, after the event loop has served other sockets.
   */
  private onBacklog(): void {
    this.socket.pause();
    setImmediate(() => {
      if (!this.dead) this.reader.resume(this.stopReading);
      // A dead connection reads on (and ignores) what comes until the peer closes, as it did before the pause.
      if (this.dead || !this.reader.backlog) this.socket.resume();
    });
  }

  /** Graceful close: GOAWAY (no new streams), then the socket ends once the open streams have. */
  shutdown(): void {
    if (this.goingAway || this.dead) return;
    this.goingAway = true;
    this.out(goawayFrame(this.lastStreamId, H2Error.NO_ERROR));
    if (this.streams.size === 0) this.endSoon();
  }

  destroy(): void {
    this.socket.destroy();
  }

  private onFrame(type: number, flags: number, sid: number, p: Buffer): void {
    if (this.block && type !== FrameType.CONTINUATION) return this.fail(H2Error.PROTOCOL_ERROR, 'expected CONTINUATION');
    switch (type) {
      case FrameType.DATA:
        this.controlWithoutData = 0;
        return this.onDataFrame(flags, sid, p);
      case FrameType.HEADERS: {
        this.controlWithoutData = 0;
        if (sid === 0) return this.fail(H2Error.PROTOCOL_ERROR, 'HEADERS on stream 0');
        const prio = (flags & Flag.PRIORITY) !== 0;
        const body = unpad(flags, p, prio ? 5 : 0);
        if (!body) return this.fail(H2Error.PROTOCOL_ERROR, 'HEADERS padding exceeds the frame');
        const offset = flags & Flag.PADDED ? 1 : 0;
        // RFC 9113 §5.3.1: a stream cannot depend on itself (a stream error; the block is still decoded).
        const selfDependent = prio && (p.readUInt32BE(offset) & 0x7fff_ffff) === sid;
        const f = selfDependent ? flags | SELF_DEPENDENT : flags;
        if (body.length > this.maxBlockBytes) return this.fail(H2Error.ENHANCE_YOUR_CALM, `header block over ${this.maxBlockBytes} bytes`);
        if (flags & Flag.END_HEADERS) return this.onHeaderBlock(sid, f, body);
        this.block = { stream: sid, flags: f, parts: [body], bytes: body.length, frames: 0 };
        return;
      }
      case FrameType.CONTINUATION: {
        const b = this.block;
        if (!b || b.stream !== sid) return this.fail(H2Error.PROTOCOL_ERROR, 'CONTINUATION without HEADERS');
        b.parts.push(p);
        b.bytes += p.length;
        if (b.bytes > this.maxBlockBytes) return this.fail(H2Error.ENHANCE_YOUR_CALM, `header block over ${this.maxBlockBytes} bytes`);
        if (++b.frames > this.limits.maxContinuations && !(flags & Flag.END_HEADERS))
          return this.fail(H2Error.ENHANCE_YOUR_CALM, `more than ${this.limits.maxContinuations} CONTINUATION frames`);
        if (!(flags & Flag.END_HEADERS)) return;
        this.block = undefined;
        return this.onHeaderBlock(sid, b.flags, Buffer.concat(b.parts));
      }
      case FrameType.PRIORITY:
        if (sid === 0) return this.fail(H2Error.PROTOCOL_ERROR, 'PRIORITY on stream 0');
        if (p.length !== 5) return this.streamError(sid, H2Error.FRAME_SIZE_ERROR);
        if ((p.readUInt32BE(0) & 0x7fff_ffff) === sid) return this.streamError(sid, H2Error.PROTOCOL_ERROR); // §5.3.1
        return;
      case FrameType.RST_STREAM:
        return this.onReset(sid, p);
      case FrameType.SETTINGS:
        return this.onSettings(flags, sid, p);
      case FrameType.PUSH_PROMISE:
        return this.fail(H2Error.PROTOCOL_ERROR, 'PUSH_PROMISE from a client');
      case FrameType.PING:
        if (p.length !== 8) return this.fail(H2Error.FRAME_SIZE_ERROR, 'PING frame not 8 bytes');
        if (sid !== 0) return this.fail(H2Error.PROTOCOL_ERROR, 'PING on a stream');
        if (flags & Flag.ACK) return;
        if (this.controlFlood()) return;
        return this.controlReply(FrameType.PING, Buffer.from(p));
      case FrameType.GOAWAY:
        if (sid !== 0) return this.fail(H2Error.PROTOCOL_ERROR, 'GOAWAY on a stream');
        return this.shutdown(); // answered with our own GOAWAY, as node:http2 does
      case FrameType.WINDOW_UPDATE:
        return this.onWindowUpdate(sid, p);
      default:
        return; // unknown frame types are ignored (RFC 9113 §4.1)
    }
  }

  private onReset(sid: number, p: Buffer): void {
    if (p.length !== 4) return this.fail(H2Error.FRAME_SIZE_ERROR, 'RST_STREAM frame not 4 bytes');
    if (sid === 0) return this.fail(H2Error.PROTOCOL_ERROR, 'RST_STREAM on stream 0');
    if (sid > this.lastStreamId) return this.fail(H2Error.PROTOCOL_ERROR, 'RST_STREAM on an idle stream');
    const s = this.streams.get(sid);
    if (!s) return;
    if (!this.resets.take(performance.now())) return this.fail(H2Error.ENHANCE_YOUR_CALM, 'too many stream resets');
    s.peerReset = true;
    s.close(true);
  }

  /** DATA or HEADERS on `sid`: the stream when it is open to the peer; otherwise answered as RFC 9113 §5.1 says, and undefined. */
  private checkOpen(sid: number, what: string): H2Stream | undefined {
    const s = this.streams.get(sid);
    if (s) {
      if (!s.remoteEnded) return s;
      this.streamError(sid, H2Error.STREAM_CLOSED); // half-closed (remote)
      return undefined;
    }
    if (sid > this.lastStreamId) return void this.fail(H2Error.PROTOCOL_ERROR, `${what} on an idle stream`);
    const how = this.closedStreams.get(sid);
    if (how === 'peer-ended') this.fail(H2Error.STREAM_CLOSED, `${what} on stream ${sid} after its END_STREAM`);
    else if (how === 'peer-reset') this.streamError(sid, H2Error.STREAM_CLOSED);
    // §5.1.1: a new stream's id must be above every earlier one (DATA of a stream closed long ago is dropped).
    else if (how === undefined && what === 'HEADERS')
      this.fail(H2Error.PROTOCOL_ERROR, `HEADERS opening stream ${sid}, not above stream ${this.lastStreamId}`);
    return undefined; // we reset it: its frames in flight are ignored
  }

  private onDataFrame(flags: number, sid: number, p: Buffer): void {
    if (sid === 0) return this.fail(H2Error.PROTOCOL_ERROR, 'DATA on stream 0');
    this.recvWindow -= p.length;
    if (this.recvWindow < 0) return this.fail(H2Error.FLOW_CONTROL_ERROR, 'DATA beyond the connection window');
    const body = unpad(flags, p, 0);
    if (!body) return this.fail(H2Error.PROTOCOL_ERROR, 'DATA padding exceeds the frame');
    const s = this.checkOpen(sid, 'DATA');
    if (!s) return this.dead ? undefined : this.creditConnection(p.length); // bytes of a closed stream are dropped
    s.recvWindow -= p.length;
    if (s.recvWindow < 0) return s.reset(H2Error.FLOW_CONTROL_ERROR);
    s.received += body.length;
    const ended = (flags & Flag.END_STREAM) !== 0;
    // RFC 9113 §8.1.1: DATA that disagrees with content-length makes the request malformed.
    if (s.declaredLength !== undefined && (s.received > s.declaredLength || (ended && s.received !== s.declaredLength))) {
      this.creditConnection(p.length);
      return s.reset(H2Error.PROTOCOL_ERROR);
    }
    if (p.length > body.length) this.credit(s, p.length - body.length); // padding
    if (body.length > 0) {
      s.onData(body);
      if (!s.manualCredit) this.credit(s, body.length);
    }
    if (ended && !s.closed) s.ended();
  }

  private onHeaderBlock(sid: number, flags: number, block: Buffer): void {
    const decoded = this.decoder.decode(block);
    if (!decoded) return this.fail(H2Error.COMPRESSION_ERROR, `header block not decodable: ${this.decoder.error}`);
    if (sid <= this.lastStreamId || this.streams.has(sid)) {
      const s = this.checkOpen(sid, 'HEADERS');
      if (!s) return;
      // Trailers from the client: they must end its side and carry no pseudo-header (RFC 9113 §8.1).
      if (!(flags & Flag.END_STREAM) || decoded.over || trailersFault(decoded.fields)) return s.reset(H2Error.PROTOCOL_ERROR);
      if (s.declaredLength !== undefined && s.received !== s.declaredLength) return s.reset(H2Error.PROTOCOL_ERROR);
      return s.ended();
    }
    if (sid % 2 === 0) return this.fail(H2Error.PROTOCOL_ERROR, `client stream id ${sid} is even`);
    this.lastStreamId = sid;
    if (this.goingAway) return this.out(rstStreamFrame(sid, H2Error.REFUSED_STREAM));
    if (decoded.over) return this.streamError(sid, H2Error.ENHANCE_YOUR_CALM);
    if (flags & SELF_DEPENDENT) return this.streamError(sid, H2Error.PROTOCOL_ERROR);
    if (this.streams.size >= this.limits.maxConcurrentStreams) return this.streamError(sid, H2Error.REFUSED_STREAM);
    const length = declaredLength(decoded.fields);
    if (requestFault(decoded.fields) || Number.isNaN(length) || (flags & Flag.END_STREAM && length))
      return this.streamError(sid, H2Error.PROTOCOL_ERROR);
    const stream = new H2Stream(sid, toHeaders(decoded.fields), this, this.peerInitialWindow, this.opts.streamWindow);
    stream.declaredLength = length;
    this.streams.set(sid, stream);
    this.onStream(stream, this);
    if (flags & Flag.END_STREAM && !stream.closed) stream.ended();
  }

  /** Reset a stream that is not (or no longer) open for a fault of the peer's; such resets spend the reset budget. */
  private streamError(sid: number, code: number): void {
    const s = this.streams.get(sid);
    if (s) return s.reset(code);
    if (!this.resets.take(performance.now())) return this.fail(H2Error.ENHANCE_YOUR_CALM, 'too many stream resets');
    this.closedStreams.add(sid, 'we-reset');
    this.out(rstStreamFrame(sid, code));
  }

  /**
   * One more PING or SETTINGS to answer; true (and the connection cut: GOAWAY ENHANCE_YOUR_CALM, then the socket
   * closed at once, as a flooding peer may not read) past maxControlWithoutData of them with no HEADERS or DATA.
   */
  private controlFlood(): boolean {
    if (++this.controlWithoutData <= this.limits.maxControlWithoutData) return false;
    this.fail(H2Error.ENHANCE_YOUR_CALM, `more than ${this.limits.maxControlWithoutData} PING and SETTINGS frames without a request`);
    setImmediate(() => this.socket.destroy());
    return true;
  }

  /** A PING or SETTINGS ACK; a peer that lets too many queue behind its unread bytes is dropped. */
  private controlReply(type: number, payload?: Buffer): void {
    this.sendFrame(type, Flag.ACK, 0, payload);
    if (this.socket.writableLength < CONTROL_SLACK) this.queuedControl = 0;
    else if (++this.queuedControl > this.limits.maxQueuedControl)
      this.drop(`more than ${this.limits.maxQueuedControl} control replies queued for a peer that does not read`);
  }

  private onSettings(flags: number, sid: number, p: Buffer): void {
    if (sid !== 0) return this.fail(H2Error.PROTOCOL_ERROR, 'SETTINGS on a stream');
    if (flags & Flag.ACK) return p.length ? this.fail(H2Error.FRAME_SIZE_ERROR, 'SETTINGS ACK with a payload') : undefined;
    if (p.length % 6 !== 0) return this.fail(H2Error.FRAME_SIZE_ERROR, 'SETTINGS not a multiple of 6 bytes');
    if (this.controlFlood()) return;
    for (let i = 0; i < p.length; i += 6) {
      const id = p.readUInt16BE(i);
      const v = p.readUInt32BE(i + 2);
      if (id === Setting.INITIAL_WINDOW_SIZE) {
        if (v > MAX_WINDOW) return this.fail(H2Error.FLOW_CONTROL_ERROR, 'SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1');
        const delta = v - this.peerInitialWindow;
        this.peerInitialWindow = v;
        for (const s of this.streams.values()) s.sendWindow += delta;
      } else if (id === Setting.MAX_FRAME_SIZE) {
        if (v < DEFAULT_MAX_FRAME || v > 0xff_ffff) return this.fail(H2Error.PROTOCOL_ERROR, `SETTINGS_MAX_FRAME_SIZE ${v} out of range`);
        this.peerMaxFrame = v;
      } else if (id === Setting.ENABLE_PUSH && v > 1) return this.fail(H2Error.PROTOCOL_ERROR, 'SETTINGS_ENABLE_PUSH not 0 or 1');
    }
    this.controlReply(FrameType.SETTINGS);
    for (const s of [...this.streams.values()]) s.pump();
  }

  private onWindowUpdate(sid: number, p: Buffer): void {
    if (p.length !== 4) return this.fail(H2Error.FRAME_SIZE_ERROR, 'WINDOW_UPDATE frame not 4 bytes');
    const inc = p.readUInt32BE(0) & 0x7fff_ffff;
    if (sid === 0) {
      if (inc === 0) return this.fail(H2Error.PROTOCOL_ERROR, 'WINDOW_UPDATE of 0');
      this.sendWindow += inc;
      if (this.sendWindow > MAX_WINDOW) return this.fail(H2Error.FLOW_CONTROL_ERROR, 'connection window above 2^31-1');
      const waiting = [...this.blocked];
      this.blocked.clear();
      for (const s of waiting) s.pump();
      return;
    }
    if (sid > this.lastStreamId) return this.fail(H2Error.PROTOCOL_ERROR, 'WINDOW_UPDATE on an idle stream');
    const s = this.streams.get(sid);
    if (!s) return; // a closed stream: allowed (RFC 9113 §5.1)
    if (inc === 0) return s.reset(H2Error.PROTOCOL_ERROR);
    s.sendWindow += inc;
    if (s.sendWindow > MAX_WINDOW) return s.reset(H2Error.FLOW_CONTROL_ERROR);
    s.pump();
  }

  // StreamOwner

  grant(stream: H2Stream, want: number): number {
    if (this.sendWindow <= 0) {
      this.blocked.add(stream);
      return 0;
    }
    const n = Math.min(want, this.sendWindow);
    this.sendWindow -= n;
    return n;
  }

  sendFrame(type: number, flags: number, stream: number, payload?: Uint8Array): void {
    const h = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
    putFrameHeader(h, 0, payload?.length ?? 0, type, flags, stream);
    this.out(h);
    if (payload?.length) this.out(payload);
  }

  sendHeaders(stream: number, block: Buffer, endStream: boolean): void {
    const es = endStream ? Flag.END_STREAM : 0;
    if (block.length <= this.peerMaxFrame) return this.sendFrame(FrameType.HEADERS, es | Flag.END_HEADERS, stream, block);
    for (let at = 0; at < block.length; at += this.peerMaxFrame) {
      const last = at + this.peerMaxFrame >= block.length;
      const piece = block.subarray(at, at + this.peerMaxFrame);
      if (at === 0) this.sendFrame(FrameType.HEADERS, es, stream, piece);
      else this.sendFrame(FrameType.CONTINUATION, last ? Flag.END_HEADERS : 0, stream, piece);
    }
  }

  credit(stream: H2Stream, n: number): void {
    this.creditConnection(n);
    if (stream.closed || stream.remoteEnded) return;
    stream.recvCredit += n;
    if (stream.recvCredit >= this.opts.streamWindow / 4) {
      this.out(windowUpdateFrame(stream.id, stream.recvCredit));
      stream.recvWindow += stream.recvCredit;
      stream.recvCredit = 0;
    }
  }

  closed(stream: H2Stream): void {
    this.streams.delete(stream.id);
    this.blocked.delete(stream);
    this.closedStreams.add(stream.id, stream.peerReset ? 'peer-reset' : stream.resetSent ? 'we-reset' : 'peer-ended');
    if (this.streams.size > 0) return;
    if (this.goingAway) this.endSoon();
    else this.idle?.refresh();
  }

  private creditConnection(n: number): void {
    this.recvCredit += n;
    if (this.recvCredit < this.opts.connectionWindow / 4) return;
    this.out(windowUpdateFrame(0, this.recvCredit));
    this.recvWindow += this.recvCredit;
    this.recvCredit = 0;
  }

  /** Queue bytes for the socket; everything queued in one tick goes out in one writev. */
  private out(b: Uint8Array): void {
    if (this.socket.destroyed) return;
    if (this.socket.writableLength > this.limits.maxBufferedBytes)
      return this.drop(`more than ${this.limits.maxBufferedBytes} bytes queued for a peer that does not read`);
    if (!this.corked) {
      this.corked = true;
      this.socket.cork();
      process.nextTick(() => {
        this.corked = false;
        this.socket.uncork();
      });
    }
    this.socket.write(b);
  }

  private fail(code: number, why: string): void {
    if (this.dead) return;
    if (code === H2Error.ENHANCE_YOUR_CALM) this.calmed = why;
    this.out(goawayFrame(this.lastStreamId, code, why));
    this.dead = true;
    this.closeStreams();
    this.endSoon();
  }

  /** A peer that does not read: a GOAWAY could not reach it, so the socket goes at once. */
  private drop(why: string): void {
    if (this.dead) return;
    this.dead = true;
    this.dropped = why;
    this.closeStreams();
    this.socket.destroy();
  }

  private endSoon(): void {
    process.nextTick(() => this.socket.end());
    setTimeout(() => this.socket.destroy(), 5000).unref();
  }

  private closeStreams(): void {
    for (const s of [...this.streams.values()]) s.close(true);
  }

  private gone(): void {
    this.dead = true;
    this.closeStreams();
    if (this.idle) clearTimeout(this.idle);
  }
}
