// The stub channel's framing: each frame is a 4-byte little-endian length and
// that many bytes of UTF-8 JSON. Control data only; tensor bytes ride in shm
// (or inline, base64, when small). Pure: no I/O.

/** The longest frame either side accepts (a corrupt length must not make us allocate gigabytes). */
export const MAX_FRAME_BYTES = 64 * 1024 * 1024;

/** One frame's bytes for `msg`. */
export function encodeFrame(msg: unknown): Buffer {
  const body = Buffer.from(JSON.stringify(msg), 'utf8');
  if (body.byteLength > MAX_FRAME_BYTES) throw new RangeError(`frame of ${body.byteLength} bytes exceeds ${MAX_FRAME_BYTES}`);
  const head = Buffer.allocUnsafe(4);
  head.writeUInt32LE(body.byteLength, 0);
  return Buffer.concat([head, body]);
}

/** Reassembles frames from arbitrary chunks; owns its buffered bytes, single-threaded. */
export class FrameDecoder {
  private chunks: Buffer[] = [];
  private buffered = 0;

  /** Feed a chunk; returns every complete frame's message, in order. Throws on a bad length or bad JSON. */
  push(chunk: Buffer): unknown[] {
    this.chunks.push(chunk);
    this.buffered += chunk.byteLength;
    const out: unknown[] = [];
    for (;;) {
      if (this.buffered < 4) break;
      const head = this.peek(4);
      const len = head.readUInt32LE(0);
      if (len > MAX_FRAME_BYTES) throw new RangeError(`frame length ${len} exceeds ${MAX_FRAME_BYTES}`);
      if (this.buffered < 4 + len) break;
      const all = this.take(4 + len);
      out.push(JSON.parse(all.toString('utf8', 4)));
    }
    return out;
  }

  private peek(n: number): Buffer {
    if (this.chunks[0]!.byteLength < n) this.chunks = [Buffer.concat(this.chunks)];
    return this.chunks[0]!.subarray(0, n);
  }

  private take(n: number): Buffer {
    const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    const rest = all.subarray(n);
    this.chunks = rest.byteLength ? [rest] : [];
    this.buffered = rest.byteLength;
    return all.subarray(0, n);
  }
}
