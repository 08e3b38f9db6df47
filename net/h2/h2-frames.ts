// HTTP/2's frame layer (RFC 9113 §4, §6), what the engine's own HTTP/2
// server (h2-connection.ts) reads and writes: the 9-byte frame header, the
// frame types, flags, error codes and settings it uses, and the header blocks
// it sends.
//
// Header blocks we send are HPACK literals "without indexing" (RFC 7541
// §6.2.2) with plain (not Huffman) strings, except `:status: 200`, which is
// static-table entry 8. That leaves the peer's decoding table untouched, so
// the encoder keeps no state and a block can be built once and reused (the
// gRPC answers' headers and OK trailers are constants). Header blocks we
// receive are decoded by hpack.js (h2-connection.ts).

export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
export const FRAME_HEADER_BYTES = 9;

export const FrameType = {
  DATA: 0,
  HEADERS: 1,
  PRIORITY: 2,
  RST_STREAM: 3,
  SETTINGS: 4,
  PUSH_PROMISE: 5,
  PING: 6,
  GOAWAY: 7,
  WINDOW_UPDATE: 8,
  CONTINUATION: 9,
} as const;

export const Flag = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4, PADDED: 0x8, PRIORITY: 0x20 } as const;

export const H2Error = {
  NO_ERROR: 0,
  PROTOCOL_ERROR: 1,
  INTERNAL_ERROR: 2,
  FLOW_CONTROL_ERROR: 3,
  STREAM_CLOSED: 5,
  FRAME_SIZE_ERROR: 6,
  REFUSED_STREAM: 7,
  CANCEL: 8,
  COMPRESSION_ERROR: 9,
  ENHANCE_YOUR_CALM: 0xb,
} as const;

export const Setting = {
  HEADER_TABLE_SIZE: 1,
  ENABLE_PUSH: 2,
  MAX_CONCURRENT_STREAMS: 3,
  INITIAL_WINDOW_SIZE: 4,
  MAX_FRAME_SIZE: 5,
  MAX_HEADER_LIST_SIZE: 6,
} as const;

/** RFC 9113's defaults, what a peer has until its SETTINGS say otherwise. */
export const DEFAULT_WINDOW = 65_535;
export const DEFAULT_MAX_FRAME = 16_384;
/** Largest window either side may reach (2^31 - 1). */
export const MAX_WINDOW = 0x7fff_ffff;

/** Write a frame header at `at` of `out`. */
export function putFrameHeader(out: Buffer, at: number, length: number, type: number, flags: number, stream: number): void {
  out[at] = length >>> 16;
  out[at + 1] = (length >>> 8) & 0xff;
  out[at + 2] = length & 0xff;
  out[at + 3] = type;
  out[at + 4] = flags;
  out.writeUInt32BE(stream, at + 5);
}

/** One whole frame (header and payload copied together). */
export function frame(type: number, flags: number, stream: number, payload?: Uint8Array): Buffer {
  const n = payload?.length ?? 0;
  const b = Buffer.allocUnsafe(FRAME_HEADER_BYTES + n);
  putFrameHeader(b, 0, n, type, flags, stream);
  if (payload) b.set(payload, FRAME_HEADER_BYTES);
  return b;
}

/** A SETTINGS frame carrying `values` (id → value). */
export function settingsFrame(values: ReadonlyArray<readonly [number, number]>): Buffer {
  const p = Buffer.allocUnsafe(6 * values.length);
  values.forEach(([id, v], i) => {
    p.writeUInt16BE(id, 6 * i);
    p.writeUInt32BE(v, 6 * i + 2);
  });
  return frame(FrameType.SETTINGS, 0, 0, p);
}

/** A 4-byte big-endian payload (WINDOW_UPDATE's increment, RST_STREAM's error code). */
export function u32(v: number): Buffer {
  const b = Buffer.allocUnsafe(4);
  b.writeUInt32BE(v >>> 0, 0);
  return b;
}

export const windowUpdateFrame = (stream: number, increment: number): Buffer => frame(FrameType.WINDOW_UPDATE, 0, stream, u32(increment));

export const rstStreamFrame = (stream: number, code: number): Buffer => frame(FrameType.RST_STREAM, 0, stream, u32(code));

export function goawayFrame(lastStream: number, code: number, debug = ''): Buffer {
  const d = Buffer.from(debug, 'utf8');
  const b = Buffer.allocUnsafe(FRAME_HEADER_BYTES + 8 + d.length);
  putFrameHeader(b, 0, 8 + d.length, FrameType.GOAWAY, 0, 0);
  b.writeUInt32BE(lastStream, FRAME_HEADER_BYTES);
  b.writeUInt32BE(code, FRAME_HEADER_BYTES + 4);
  d.copy(b, FRAME_HEADER_BYTES + 8);
  return b;
}

/** A header list to send, in order; pseudo-headers first. */
export type HeaderList = ReadonlyArray<readonly [string, string]>;

/** HPACK integer with an N-bit prefix (RFC 7541 §5.1), `first` holding the bits above the prefix. */
function pushInt(out: number[], value: number, prefixBits: number, first: number): void {
  const max = (1 << prefixBits) - 1;
  if (value < max) {
    out.push(first | value);
    return;
  }
  out.push(first | max);
  value -= max;
  while (value >= 128) {
    out.push((value & 0x7f) | 0x80);
    value = Math.floor(value / 128);
  }
  out.push(value);
}

function pushString(out: number[], s: string): void {
  const b = Buffer.from(s, 'latin1');
  pushInt(out, b.length, 7, 0); // H = 0: not Huffman-coded
  for (const x of b) out.push(x);
}

/**
 * An HPACK header block for `headers`: `:status: 200` indexed, everything
 * else a literal without indexing with a literal name. Names must be
 * lowercase; values are sent as latin1 bytes (gRPC's grpc-message is
 * percent-encoded ASCII, binary metadata base64).
 */
export function encodeHeaderBlock(headers: HeaderList): Buffer {
  const out: number[] = [];
  for (const [name, value] of headers) {
    if (name === ':status' && value === '200') {
      out.push(0x88);
      continue;
    }
    out.push(0x00);
    pushString(out, name);
    pushString(out, value);
  }
  return Buffer.from(out);
}
