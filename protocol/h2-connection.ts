// The server side of one HTTP/2 connection (RFC 9113), ours rather than
// node:http2's, for the engine's gRPC port (docs/engine/h2-front.md: why, and
// what it costs per call against node:http2). It keeps the streams, the
// settings and both directions' flow control, and hands each new stream to
// `onStream`. Not done: server push, priorities (ignored, as RFC 9113
// allows), TLS (the socket is plain), h2c upgrade from HTTP/1.1.
//
// Errors: a peer breaking the protocol gets a GOAWAY naming the error and
// the connection closes; a stream-level fault resets that stream only.
// Every stream still open when the connection goes is closed as aborted.
import type { Socket } from 'node:net';
import {
  DEFAULT_MAX_FRAME, DEFAULT_WINDOW, Flag, FRAME_HEADER_BYTES, FrameType, goawayFrame, H2Error, MAX_WINDOW, putFrameHeader, rstStreamFrame, Setting, settingsFrame, windowUpdateFrame,
} from './h2-frames.ts';
import { H2Stream, type StreamOwner } from './h2-stream.ts';
import { FrameReader, HeaderDecoder, unpad } from './h2-frame-reader.ts';

export interface H2ServerOptions {
  /** Largest frame we accept (advertised as SETTINGS_MAX_FRAME_SIZE). */
  maxFrameSize: number;
  /** Our receive window per stream (SETTINGS_INITIAL_WINDOW_SIZE) and for the connection. */
  streamWindow: number;
  connectionWindow: number;
  /** Largest header block (HEADERS and its CONTINUATIONs) accepted; default 256 KiB. */
  maxHeaderBlockBytes?: number;
}

/** Owns the socket, its streams and the HPACK decoding state; single-threaded. */
export class H2ServerConnection implements StreamOwner {
  private readonly streams = new Map<number, H2Stream>();
  private readonly blocked = new Set<H2Stream>();
  private readonly decoder = new HeaderDecoder();
  private readonly reader: FrameReader;
  private lastStreamId = 0;
  /** A header block being assembled from HEADERS + CONTINUATION. */
  private block: { stream: number; flags: number; parts: Buffer[]; bytes: number } | undefined;
  peerMaxFrame = DEFAULT_MAX_FRAME;
  private peerInitialWindow = DEFAULT_WINDOW;
  private sendWindow = DEFAULT_WINDOW;
  private recvWindow: number;
  private recvCredit = 0;
  private goingAway = false;
  private dead = false;
  private corked = false;

  constructor(
    private readonly socket: Socket,
    private readonly opts: H2ServerOptions,
    private readonly onStream: (stream: H2Stream, conn: H2ServerConnection) => void,
  ) {
    this.recvWindow = opts.connectionWindow;
    this.reader = new FrameReader(opts.maxFrameSize, (t, f, sid, p) => this.onFrame(t, f, sid, p), (code, why) => this.fail(code, why));
    socket.setNoDelay(true);
    this.out(settingsFrame([[Setting.MAX_FRAME_SIZE, opts.maxFrameSize], [Setting.INITIAL_WINDOW_SIZE, opts.streamWindow], [Setting.ENABLE_PUSH, 0]]));
    if (opts.connectionWindow > DEFAULT_WINDOW) this.out(windowUpdateFrame(0, opts.connectionWindow - DEFAULT_WINDOW));
    socket.on('data', (chunk: Buffer) => {
      if (!this.dead) this.reader.push(chunk, () => this.dead);
    });
    socket.on('error', () => undefined); // 'close' follows
    socket.on('close', () => this.gone());
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
        return this.onDataFrame(flags, sid, p);
      case FrameType.HEADERS: {
        if (sid === 0) return this.fail(H2Error.PROTOCOL_ERROR, 'HEADERS on stream 0');
        const body = unpad(flags, p, (flags & Flag.PRIORITY) !== 0 ? 5 : 0);
        if (!body) return this.fail(H2Error.PROTOCOL_ERROR, 'HEADERS padding exceeds the frame');
        if (flags & Flag.END_HEADERS) return this.onHeaderBlock(sid, flags, body);
        this.block = { stream: sid, flags, parts: [body], bytes: body.length };
        return;
      }
      case FrameType.CONTINUATION: {
        const b = this.block;
        if (!b || b.stream !== sid) return this.fail(H2Error.PROTOCOL_ERROR, 'CONTINUATION without HEADERS');
        b.parts.push(p);
        b.bytes += p.length;
        if (b.bytes > (this.opts.maxHeaderBlockBytes ?? 256 << 10)) return this.fail(H2Error.ENHANCE_YOUR_CALM, `header block over ${this.opts.maxHeaderBlockBytes ?? 256 << 10} bytes`);
        if (!(flags & Flag.END_HEADERS)) return;
        this.block = undefined;
        return this.onHeaderBlock(sid, b.flags, Buffer.concat(b.parts));
      }
      case FrameType.PRIORITY:
        if (p.length !== 5) return this.fail(H2Error.FRAME_SIZE_ERROR, 'PRIORITY frame not 5 bytes');
        return;
      case FrameType.RST_STREAM:
        if (p.length !== 4) return this.fail(H2Error.FRAME_SIZE_ERROR, 'RST_STREAM frame not 4 bytes');
        if (sid === 0) return this.fail(H2Error.PROTOCOL_ERROR, 'RST_STREAM on stream 0');
        if (sid > this.lastStreamId) return this.fail(H2Error.PROTOCOL_ERROR, 'RST_STREAM on an idle stream');
        this.streams.get(sid)?.close(true);
        return;
      case FrameType.SETTINGS:
        return this.onSettings(flags, sid, p);
      case FrameType.PUSH_PROMISE:
        return this.fail(H2Error.PROTOCOL_ERROR, 'PUSH_PROMISE from a client');
      case FrameType.PING:
        if (p.length !== 8) return this.fail(H2Error.FRAME_SIZE_ERROR, 'PING frame not 8 bytes');
        if (sid !== 0) return this.fail(H2Error.PROTOCOL_ERROR, 'PING on a stream');
        if (!(flags & Flag.ACK)) this.sendFrame(FrameType.PING, Flag.ACK, 0, Buffer.from(p));
        return;
      case FrameType.GOAWAY:
        this.goingAway = true;
        if (this.streams.size === 0) this.endSoon();
        return;
      case FrameType.WINDOW_UPDATE:
        return this.onWindowUpdate(sid, p);
      default:
        return; // unknown frame types are ignored (RFC 9113 §4.1)
    }
  }

  private onDataFrame(flags: number, sid: number, p: Buffer): void {
    if (sid === 0) return this.fail(H2Error.PROTOCOL_ERROR, 'DATA on stream 0');
    this.recvWindow -= p.length;
    if (this.recvWindow < 0) return this.fail(H2Error.FLOW_CONTROL_ERROR, 'DATA beyond the connection window');
    const body = unpad(flags, p, 0);
    if (!body) return this.fail(H2Error.PROTOCOL_ERROR, 'DATA padding exceeds the frame');
    const s = this.streams.get(sid);
    if (!s) {
      if (sid > this.lastStreamId) return this.fail(H2Error.PROTOCOL_ERROR, 'DATA on an idle stream');
      return this.creditConnection(p.length); // a stream we closed: its bytes in flight are dropped
    }
    if (s.remoteEnded) return s.reset(H2Error.STREAM_CLOSED);
    s.recvWindow -= p.length;
    if (s.recvWindow < 0) return s.reset(H2Error.FLOW_CONTROL_ERROR);
    if (p.length > body.length) this.credit(s, p.length - body.length); // padding
    if (body.length > 0) {
      s.onData(body);
      if (!s.manualCredit) this.credit(s, body.length);
    }
    if (flags & Flag.END_STREAM && !s.closed) s.ended();
  }

  private onHeaderBlock(sid: number, flags: number, block: Buffer): void {
    const headers = this.decoder.decode(block);
    if (!headers) return this.fail(H2Error.COMPRESSION_ERROR, `header block not decodable: ${this.decoder.error}`);
    const s = this.streams.get(sid);
    if (s) {
      // Trailers from the client: they must end its side.
      if (!(flags & Flag.END_STREAM)) return s.reset(H2Error.PROTOCOL_ERROR);
      return s.ended();
    }
    if (sid <= this.lastStreamId) return; // a stream already closed (we reset it): nothing to do
    if (sid % 2 === 0) return this.fail(H2Error.PROTOCOL_ERROR, `client stream id ${sid} is even`);
    this.lastStreamId = sid;
    if (this.goingAway) return this.out(rstStreamFrame(sid, H2Error.REFUSED_STREAM));
    const stream = new H2Stream(sid, headers, this, this.peerInitialWindow, this.opts.streamWindow);
    if (typeof headers[':method'] !== 'string' || typeof headers[':path'] !== 'string') return void stream.reset(H2Error.PROTOCOL_ERROR);
    this.streams.set(sid, stream);
    this.onStream(stream, this);
    if (flags & Flag.END_STREAM && !stream.closed) stream.ended();
  }

  private onSettings(flags: number, sid: number, p: Buffer): void {
    if (sid !== 0) return this.fail(H2Error.PROTOCOL_ERROR, 'SETTINGS on a stream');
    if (flags & Flag.ACK) return p.length ? this.fail(H2Error.FRAME_SIZE_ERROR, 'SETTINGS ACK with a payload') : undefined;
    if (p.length % 6 !== 0) return this.fail(H2Error.FRAME_SIZE_ERROR, 'SETTINGS not a multiple of 6 bytes');
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
    this.sendFrame(FrameType.SETTINGS, Flag.ACK, 0);
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
    const s = this.streams.get(sid);
    if (!s) return;
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
    if (this.goingAway && this.streams.size === 0) this.endSoon();
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
    this.out(goawayFrame(this.lastStreamId, code, why));
    this.dead = true;
    this.closeStreams();
    this.endSoon();
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
  }
}
