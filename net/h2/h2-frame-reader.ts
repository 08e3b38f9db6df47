// Reading an HTTP/2 connection's bytes (RFC 9113 §3.4, §4.1, §6): the client
// preface, then whole frames, assembled from socket chunks of any size with at
// most one copy per frame. Used by h2-connection.ts; header blocks are
// decoded by h2-header-decoder.ts.
import { Flag, FRAME_HEADER_BYTES, FrameType, H2Error, PREFACE } from './h2-frames.ts';

/** How much of a connection's bytes one turn of the event loop may handle (h2-limits.ts). */
export interface TurnBudget {
  frames: number;
  /** HEADERS and CONTINUATION payload bytes. */
  headerBytes: number;
}

/**
 * Splits a connection's bytes into frames. Owns the bytes received but not
 * yet parsed; a frame's payload is a view of a received chunk (or of one
 * concatenation of several), never reused afterwards. At most `budget`'s
 * worth of frames go to onFrame per call: past it the rest is kept (a
 * backlog) and `onBacklog` is called, whose owner stops reading and calls
 * `resume` on a later turn.
 */
export class FrameReader {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** Bytes the next step needs: the preface, a frame header, or a whole frame. */
  private need = PREFACE.length;
  private prefaceSeen = false;
  /** Whole frames are waiting for resume() (the budget ran out with them unread). */
  backlog = false;

  constructor(
    private readonly maxFrameSize: number,
    private readonly onFrame: (type: number, flags: number, stream: number, payload: Buffer) => void,
    private readonly fail: (code: number, why: string) => void,
    private readonly budget: TurnBudget = { frames: Infinity, headerBytes: Infinity },
    private readonly onBacklog: () => void = () => undefined,
  ) {}

  /** Take a chunk; frames go to onFrame until `stop()` says the connection is done or the turn's budget is spent. */
  push(chunk: Buffer, stop: () => boolean): void {
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    if (!this.backlog) this.read(stop);
  }

  /** Go on with the backlog, a turn later. */
  resume(stop: () => boolean): void {
    this.backlog = false;
    this.read(stop);
  }

  private read(stop: () => boolean): void {
    if (this.pendingBytes < this.need) return;
    const data = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending, this.pendingBytes);
    let off = 0;
    if (!this.prefaceSeen) {
      if (!data.subarray(0, PREFACE.length).equals(PREFACE)) return this.fail(H2Error.PROTOCOL_ERROR, 'expected the HTTP/2 client preface');
      this.prefaceSeen = true;
      off = PREFACE.length;
    }
    this.need = FRAME_HEADER_BYTES;
    let frames = this.budget.frames;
    let headerBytes = this.budget.headerBytes;
    while (data.length - off >= FRAME_HEADER_BYTES) {
      if (frames <= 0 || headerBytes <= 0) {
        this.backlog = true;
        break;
      }
      const len = (data[off]! << 16) | (data[off + 1]! << 8) | data[off + 2]!;
      if (len > this.maxFrameSize)
        return this.fail(H2Error.FRAME_SIZE_ERROR, `frame of ${len} bytes exceeds SETTINGS_MAX_FRAME_SIZE ${this.maxFrameSize}`);
      if (data.length - off - FRAME_HEADER_BYTES < len) {
        this.need = FRAME_HEADER_BYTES + len;
        break;
      }
      const type = data[off + 3]!;
      const flags = data[off + 4]!;
      const sid = data.readUInt32BE(off + 5) & 0x7fff_ffff;
      const payload = data.subarray(off + FRAME_HEADER_BYTES, off + FRAME_HEADER_BYTES + len);
      off += FRAME_HEADER_BYTES + len;
      frames--;
      if (type === FrameType.HEADERS || type === FrameType.CONTINUATION) headerBytes -= len;
      this.onFrame(type, flags, sid, payload);
      if (stop()) return;
    }
    const rest = data.length - off;
    this.pending = rest > 0 ? [data.subarray(off)] : [];
    this.pendingBytes = rest;
    if (this.backlog) this.onBacklog();
  }
}

/** The frame's content without its padding and `skip` leading bytes; undefined when the padding does not fit. */
export function unpad(flags: number, p: Buffer, skip: number): Buffer | undefined {
  if (!(flags & Flag.PADDED)) return skip ? (p.length < skip ? undefined : p.subarray(skip)) : p;
  if (p.length < 1) return undefined;
  const pad = p[0]!;
  if (1 + skip + pad > p.length) return undefined;
  return p.subarray(1 + skip, p.length - pad);
}
