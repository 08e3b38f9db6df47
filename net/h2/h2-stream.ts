// One HTTP/2 stream of the engine's own HTTP/2 server (h2-connection.ts):
// the request side as callbacks, the answer side as respond / write / end,
// with RFC 9113's send flow control (§6.9) applied to what it writes.
import { encodeHeaderBlock as encodeBlock, Flag, FrameType, H2Error, u32, type HeaderList } from './h2-frames.ts';

/** Request headers as Node's http2 gives them: lowercase names, repeated ones in an array. */
export type H2Headers = Record<string, string | string[]>;

/** What a stream needs of its connection. */
export interface StreamOwner {
  /** Up to `want` bytes of the connection's send window (0: none left now; the stream is woken when there is). */
  grant(stream: H2Stream, want: number): number;
  /** The peer's SETTINGS_MAX_FRAME_SIZE. */
  readonly peerMaxFrame: number;
  /** Queue a frame header for `stream` and, after it, `payload` (not copied). */
  sendFrame(type: number, flags: number, stream: number, payload?: Uint8Array): void;
  /** A header block (split into CONTINUATION frames when the peer's frame size needs it). */
  sendHeaders(stream: number, block: Buffer, endStream: boolean): void;
  /** `n` bytes of `stream`'s request were consumed: give the peer that much window back. */
  credit(stream: H2Stream, n: number): void;
  /** The stream closed (removed from the connection). */
  closed(stream: H2Stream): void;
}

/** Above this many queued answer bytes write() returns false; onDrain is called once they are sent. */
const HIGH_WATER = 1 << 20;
const noop = () => undefined;

/**
 * Owns one stream's state and its unsent answer bytes. Single-threaded; the
 * callbacks are set by whoever serves the stream, right when it opens.
 */
export class H2Stream {
  /** Request body bytes, in order. Consumed at once unless `manualCredit` (then call consumed()). */
  onData: (chunk: Buffer) => void = noop;
  /** The request side ended (END_STREAM received). */
  onEnd: () => void = noop;
  /** The stream is gone; `aborted` when its answer did not end (a reset by either side, or the connection lost). */
  onClose: (aborted: boolean) => void = noop;
  /** The answer's queued bytes fell below the high-water mark after write() returned false. */
  onDrain: () => void = noop;
  /** True: the request bytes are credited back only when consumed() is called (a proxy applying backpressure). */
  manualCredit = false;

  remoteEnded = false;
  /** The peer reset the stream (RST_STREAM received). */
  peerReset = false;
  /** We reset the stream (RST_STREAM sent). */
  resetSent = false;
  /** The request's content-length, when it declared one (RFC 9113 §8.1.1: DATA must add up to it). */
  declaredLength: number | undefined;
  /** Request body bytes received (padding excluded). */
  received = 0;
  /** Bytes the peer may still send on this stream (our window for it). */
  recvWindow: number;
  /** Request bytes consumed but not yet given back to the peer in a WINDOW_UPDATE. */
  recvCredit = 0;
  /** Bytes we may still send (the peer's window for this stream). */
  sendWindow: number;
  private headersSent = false;
  /** end() was called: once the queue is sent, `trailers` (or an empty END_STREAM DATA) closes our side. */
  private ending = false;
  private trailers: Buffer | undefined;
  private finSent = false;
  private readonly queue: Uint8Array[] = [];
  private queued = 0;
  private wantDrain = false;
  closed = false;

  constructor(
    readonly id: number,
    readonly headers: H2Headers,
    private readonly owner: StreamOwner,
    sendWindow: number,
    recvWindow: number,
  ) {
    this.sendWindow = sendWindow;
    this.recvWindow = recvWindow;
  }

  /** Answer headers; `endStream` for a headers-only (gRPC: trailers-only) answer. */
  respond(headers: HeaderList | Buffer, endStream = false): void {
    if (this.closed || this.headersSent) return;
    this.headersSent = true;
    this.owner.sendHeaders(this.id, Buffer.isBuffer(headers) ? headers : encodeBlock(headers), endStream);
    if (endStream) this.finish();
  }

  /** Queue answer bytes (not copied: the caller must not reuse them); false once over the high-water mark. */
  write(data: Uint8Array): boolean {
    if (this.closed || this.ending || data.length === 0) return !this.closed;
    this.queue.push(data);
    this.queued += data.length;
    this.pump();
    if (this.queued < HIGH_WATER) return true;
    this.wantDrain = true;
    return false;
  }

  /** End the answer after what is queued, with `trailers` when given. */
  end(trailers?: HeaderList | Buffer): void {
    if (this.closed || this.ending) return;
    this.ending = true;
    if (trailers) this.trailers = Buffer.isBuffer(trailers) ? trailers : encodeBlock(trailers);
    this.pump();
  }

  /** Abort the stream (RST_STREAM with `code`). */
  reset(code: number = H2Error.CANCEL): void {
    if (this.closed) return;
    this.resetSent = true;
    this.owner.sendFrame(FrameType.RST_STREAM, 0, this.id, u32(code));
    this.close(code !== H2Error.NO_ERROR || !this.finSent);
  }

  /** `n` request bytes handed to onData were consumed (manualCredit only). */
  consumed(n: number): void {
    if (!this.closed && this.manualCredit) this.owner.credit(this, n);
  }

  /** Send what the windows allow; called again when they open. */
  pump(): void {
    while (this.queue.length > 0 && !this.closed) {
      const head = this.queue[0]!;
      const want = Math.min(head.length, this.sendWindow, this.owner.peerMaxFrame);
      if (want <= 0) return;
      const n = this.owner.grant(this, want);
      if (n === 0) return;
      const piece = n === head.length ? head : head.subarray(0, n);
      if (n === head.length) this.queue.shift();
      else this.queue[0] = head.subarray(n);
      this.queued -= n;
      this.sendWindow -= n;
      const last = this.ending && this.queue.length === 0 && !this.trailers;
      this.owner.sendFrame(FrameType.DATA, last ? Flag.END_STREAM : 0, this.id, piece);
      if (last) return this.finish();
    }
    if (this.wantDrain && this.queued < HIGH_WATER && !this.closed) {
      this.wantDrain = false;
      this.onDrain();
    }
    if (this.ending && this.queue.length === 0 && !this.finSent && !this.closed) {
      if (!this.headersSent) this.respond([[':status', '200']]);
      if (this.finSent) return;
      if (this.trailers) this.owner.sendHeaders(this.id, this.trailers, true);
      else this.owner.sendFrame(FrameType.DATA, Flag.END_STREAM, this.id);
      this.finish();
    }
  }

  /** Our side ended: the stream closes if the peer's has too, else the peer is told to stop sending (RFC 9113 §8.1). */
  private finish(): void {
    this.finSent = true;
    this.queue.length = 0;
    this.queued = 0;
    if (this.remoteEnded) this.close(false);
    else this.reset(H2Error.NO_ERROR);
  }

  /** The peer's END_STREAM arrived (on an open stream: once our side has ended, the stream is closed). */
  ended(): void {
    this.remoteEnded = true;
    this.onEnd();
  }

  /** Close now (a reset either way, the connection gone, or both sides ended). */
  close(aborted: boolean): void {
    if (this.closed) return;
    this.closed = true;
    this.queue.length = 0;
    this.queued = 0;
    this.owner.closed(this);
    this.onClose(aborted);
  }
}
