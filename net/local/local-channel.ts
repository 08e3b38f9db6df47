// The colocated request channel's framing (docs/engine/local-channel.md):
// unary ModelInfer between a gateway and an engine on one host over a Unix
// socket, without HTTP/2. Both sides read this one module.
//
// A connection opens with HELLO (client) and WELCOME or a call-0 ERROR
// (server); then frames `u32 length | u8 type | u32 call id | payload`
// (big-endian, `length` counts the payload only) in both directions.
// REQUEST and RESPONSE carry the same ModelInferRequest / ModelInferResponse
// protobuf bytes a gRPC call would, so the engine runs them through its gRPC
// handler and the semantics (errors, deadlines, shm tensors) are gRPC's.
//
// Pure codec: no sockets, no timers. The reader never throws on bad input;
// it returns the error text and the connection is to be closed.

/** 'TRLC': the first four bytes of a HELLO's payload. */
export const LOCAL_MAGIC = 0x54524c43;
/** The one version this code speaks. A peer that asks for another gets a call-0 ERROR (UNIMPLEMENTED). */
export const LOCAL_VERSION = 1;
/** Bytes before each frame's payload. */
export const FRAME_HEADER_BYTES = 9;
/** Length and type: enough to refuse a frame before its call id arrives. */
const CHECKABLE = 5;

export const FrameType = {
  HELLO: 1,
  WELCOME: 2,
  REQUEST: 3,
  RESPONSE: 4,
  ERROR: 5,
  CANCEL: 6,
} as const;
export type FrameType = (typeof FrameType)[keyof typeof FrameType];

const TYPE_NAMES = ['', 'HELLO', 'WELCOME', 'REQUEST', 'RESPONSE', 'ERROR', 'CANCEL'];
/** A frame type's name for messages ("type 0x7f" for an unknown one). */
export const frameTypeName = (t: number): string => TYPE_NAMES[t] || `type 0x${t.toString(16).padStart(2, '0')}`;

/** One frame as read: `payload` is a view (of the chunk it arrived in, or of the joined chunks). */
export type FrameHandler = (type: FrameType, id: number, payload: Buffer) => void;

/**
 * Reassembles frames from a byte stream split anywhere. write() hands each
 * complete frame to `onFrame` in order and returns undefined, or returns the
 * text of the first framing error (a length over the limit, an unknown
 * type); after an error the reader takes nothing more.
 */
export class LocalFrameReader {
  private parts: Buffer[] = [];
  private have = 0;
  /** Whole size of the held frame once its header is in (0: not yet). */
  private need = 0;
  private failed: string | undefined;

  /** `maxPayload`: the largest payload accepted (bytes). */
  constructor(private readonly maxPayload: number) {}

  write(chunk: Buffer, onFrame: FrameHandler): string | undefined {
    if (this.failed) return this.failed;
    let buf = chunk;
    if (this.have) {
      this.parts.push(chunk);
      this.have += chunk.length;
      if (this.need === 0) {
        if (this.have < CHECKABLE) return undefined;
        const need = this.needed();
        if (typeof need === 'string') return this.fail(need);
        this.need = need;
      }
      if (this.have < this.need) return undefined;
      buf = Buffer.concat(this.parts, this.have);
      this.parts = [];
      this.have = 0;
      this.need = 0;
    }
    let at = 0;
    while (buf.length - at >= CHECKABLE) {
      const len = buf.readUInt32BE(at);
      const type = buf[at + 4]!;
      const bad = this.check(len, type);
      if (bad) return this.fail(bad);
      if (buf.length - at < FRAME_HEADER_BYTES) break;
      const end = at + FRAME_HEADER_BYTES + len;
      if (end > buf.length) break;
      onFrame(type as FrameType, buf.readUInt32BE(at + 5), buf.subarray(at + FRAME_HEADER_BYTES, end));
      if (this.failed) return this.failed;
      at = end;
    }
    if (at < buf.length) {
      this.parts.push(at === 0 ? buf : buf.subarray(at));
      this.have = buf.length - at;
    }
    return undefined;
  }

  /** Stop reading (the owner closes the connection); later writes return `reason`. */
  stop(reason: string): void {
    this.failed ??= reason;
    this.parts = [];
    this.have = 0;
    this.need = 0;
  }

  /** Bytes held for an incomplete frame. */
  get pending(): number {
    return this.have;
  }

  /** Whole bytes of the frame at the head of the held parts, or a framing error. */
  private needed(): number | string {
    const head = Buffer.allocUnsafe(CHECKABLE);
    let got = 0;
    for (const p of this.parts) {
      got += p.copy(head, got, 0, Math.min(p.length, CHECKABLE - got));
      if (got === CHECKABLE) break;
    }
    const len = head.readUInt32BE(0);
    return this.check(len, head[4]!) ?? FRAME_HEADER_BYTES + len;
  }

  private check(len: number, type: number): string | undefined {
    if (type < FrameType.HELLO || type > FrameType.CANCEL) return `unknown frame type 0x${type.toString(16).padStart(2, '0')}`;
    if (len > this.maxPayload) return `${frameTypeName(type)} frame of ${len} bytes exceeds the limit of ${this.maxPayload}`;
    return undefined;
  }

  private fail(reason: string): string {
    this.stop(reason);
    return reason;
  }
}

/** A frame's header followed by `payload` (one Buffer; for small frames). */
export function encodeFrame(type: FrameType, id: number, payload: Uint8Array = EMPTY): Buffer {
  const b = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.length);
  writeHeader(b, 0, type, id, payload.length);
  b.set(payload, FRAME_HEADER_BYTES);
  return b;
}

const EMPTY = new Uint8Array(0);

export function writeHeader(b: Buffer, at: number, type: FrameType, id: number, len: number): void {
  b.writeUInt32BE(len, at);
  b[at + 4] = type;
  b.writeUInt32BE(id >>> 0, at + 5);
}

/** HELLO: magic, version, and the metadata a gRPC call would carry (restricted-protocol keys). */
export interface Hello {
  version: number;
  metadata: Record<string, string>;
}

export function encodeHello(h: Hello): Buffer {
  const pairs = Object.entries(h.metadata).map(([k, v]) => [Buffer.from(k.toLowerCase()), Buffer.from(v)] as const);
  const size = 8 + pairs.reduce((n, [k, v]) => n + 2 + k.length + 4 + v.length, 0);
  const p = Buffer.allocUnsafe(size);
  p.writeUInt32BE(LOCAL_MAGIC, 0);
  p.writeUInt16BE(h.version, 4);
  p.writeUInt16BE(pairs.length, 6);
  let at = 8;
  for (const [k, v] of pairs) {
    at = p.writeUInt16BE(k.length, at);
    at += k.copy(p, at);
    at = p.writeUInt32BE(v.length, at);
    at += v.copy(p, at);
  }
  return encodeFrame(FrameType.HELLO, 0, p);
}

/** A HELLO's payload, or the text of what is wrong with it. */
export function decodeHello(p: Buffer): Hello | string {
  if (p.length < 8 || p.readUInt32BE(0) !== LOCAL_MAGIC) return 'HELLO does not start with the magic TRLC: not a local-channel client';
  const version = p.readUInt16BE(4);
  const n = p.readUInt16BE(6);
  const metadata: Record<string, string> = Object.create(null);
  let at = 8;
  for (let i = 0; i < n; i++) {
    if (at + 2 > p.length) return `HELLO truncated in metadata pair ${i}`;
    const kl = p.readUInt16BE(at);
    if (at + 2 + kl + 4 > p.length) return `HELLO truncated in metadata pair ${i}`;
    const k = p.toString('utf8', at + 2, at + 2 + kl);
    at += 2 + kl;
    const vl = p.readUInt32BE(at);
    if (at + 4 + vl > p.length) return `HELLO truncated in metadata pair ${i}`;
    metadata[k.toLowerCase()] = p.toString('utf8', at + 4, at + 4 + vl);
    at += 4 + vl;
  }
  if (at !== p.length) return `HELLO has ${p.length - at} bytes after its ${n} metadata pairs`;
  return { version, metadata };
}

/** WELCOME: the version the server speaks on this connection and the largest REQUEST payload it takes. */
export function encodeWelcome(version: number, maxRequestBytes: number): Buffer {
  const p = Buffer.allocUnsafe(6);
  p.writeUInt16BE(version, 0);
  p.writeUInt32BE(Math.min(maxRequestBytes, 0xffffffff), 2);
  return encodeFrame(FrameType.WELCOME, 0, p);
}

export function decodeWelcome(p: Buffer): { version: number; maxRequestBytes: number } | string {
  if (p.length !== 6) return `WELCOME of ${p.length} bytes (expected 6)`;
  return { version: p.readUInt16BE(0), maxRequestBytes: p.readUInt32BE(2) };
}

/** REQUEST's fixed fields before the ModelInferRequest bytes: u32 timeout ms (0: none), u16 traceparent length. */
export const REQUEST_FIELDS_BYTES = 6;

/** The header and fixed fields of a REQUEST whose ModelInferRequest is `messageBytes` long (the message is written after it). */
export function requestHead(id: number, timeoutMs: number, traceparent: string | undefined, messageBytes: number): Buffer {
  const tpLen = traceparent ? Buffer.byteLength(traceparent) : 0;
  const headLen = FRAME_HEADER_BYTES + REQUEST_FIELDS_BYTES + tpLen;
  const b = Buffer.allocUnsafe(headLen);
  writeHeader(b, 0, FrameType.REQUEST, id, REQUEST_FIELDS_BYTES + tpLen + messageBytes);
  b.writeUInt32BE(Math.max(0, Math.min(Math.ceil(timeoutMs), 0xffffffff)), FRAME_HEADER_BYTES);
  b.writeUInt16BE(tpLen, FRAME_HEADER_BYTES + 4);
  if (tpLen) b.write(traceparent!, FRAME_HEADER_BYTES + REQUEST_FIELDS_BYTES, 'utf8');
  return b;
}

export interface RequestFields {
  /** 0: no deadline. */
  timeoutMs: number;
  traceparent: string | undefined;
  /** The ModelInferRequest protobuf bytes (a view of the payload). */
  message: Buffer;
}

export function decodeRequest(p: Buffer): RequestFields | string {
  if (p.length < REQUEST_FIELDS_BYTES) return `REQUEST of ${p.length} bytes is shorter than its ${REQUEST_FIELDS_BYTES} fixed bytes`;
  const tpLen = p.readUInt16BE(4);
  if (REQUEST_FIELDS_BYTES + tpLen > p.length) return `REQUEST's traceparent of ${tpLen} bytes runs past its end`;
  const tp = tpLen ? p.toString('utf8', REQUEST_FIELDS_BYTES, REQUEST_FIELDS_BYTES + tpLen) : undefined;
  return { timeoutMs: p.readUInt32BE(0), traceparent: tp, message: p.subarray(REQUEST_FIELDS_BYTES + tpLen) };
}

/** ERROR: u8 gRPC status code, then the status message (UTF-8). Call id 0: the connection's (then closed). */
export function encodeError(id: number, code: number, message: string): Buffer {
  const m = Buffer.from(message);
  const b = Buffer.allocUnsafe(FRAME_HEADER_BYTES + 1 + m.length);
  writeHeader(b, 0, FrameType.ERROR, id, 1 + m.length);
  b[FRAME_HEADER_BYTES] = code;
  m.copy(b, FRAME_HEADER_BYTES + 1);
  return b;
}

export function decodeError(p: Buffer): { code: number; message: string } | string {
  if (p.length < 1) return 'ERROR frame without a status code';
  return { code: p[0]!, message: p.toString('utf8', 1) };
}
