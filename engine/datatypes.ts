// KServe v2 datatypes, their config-enum names (TYPE_*), element sizes and
// typed-array views. BYTES tensors are serialized as 4-byte little-endian
// length + bytes per element, as Triton does.
import { invalidArg } from './status.ts';

export type Datatype =
  | 'BOOL'
  | 'UINT8'
  | 'UINT16'
  | 'UINT32'
  | 'UINT64'
  | 'INT8'
  | 'INT16'
  | 'INT32'
  | 'INT64'
  | 'FP16'
  | 'BF16'
  | 'FP32'
  | 'FP64'
  | 'BYTES';

export const DATATYPES: readonly Datatype[] = [
  'BOOL', 'UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64',
  'FP16', 'BF16', 'FP32', 'FP64', 'BYTES',
];

const SIZE: Record<Datatype, number> = {
  BOOL: 1, UINT8: 1, UINT16: 2, UINT32: 4, UINT64: 8, INT8: 1, INT16: 2, INT32: 4, INT64: 8,
  FP16: 2, BF16: 2, FP32: 4, FP64: 8, BYTES: 0,
};

export function isDatatype(s: string): s is Datatype {
  return (DATATYPES as readonly string[]).includes(s);
}

/** Size of one element in bytes; 0 for BYTES (variable). */
export function elementSize(dt: Datatype): number {
  return SIZE[dt];
}

/** Config enum (TYPE_FP32) to wire datatype (FP32). TYPE_STRING is BYTES. */
export function fromConfigType(t: string): Datatype {
  if (t === 'TYPE_STRING') return 'BYTES';
  const s = t.startsWith('TYPE_') ? t.slice(5) : t;
  if (!isDatatype(s)) throw invalidArg(`unknown data type '${t}'`);
  return s;
}

/** Wire datatype (FP32) to config enum (TYPE_FP32); BYTES is TYPE_STRING. */
export function toConfigType(dt: Datatype): string {
  return dt === 'BYTES' ? 'TYPE_STRING' : `TYPE_${dt}`;
}

/** Number of elements of a shape (1 for a scalar shape []). */
export function elementCount(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** Expected byte size of a fixed-size tensor, or -1 for BYTES. */
export function byteSizeOf(dt: Datatype, shape: readonly number[]): number {
  return dt === 'BYTES' ? -1 : SIZE[dt] * elementCount(shape);
}

export type TypedArray =
  | Uint8Array | Int8Array | Uint16Array | Int16Array | Uint32Array | Int32Array
  | BigUint64Array | BigInt64Array | Float32Array | Float64Array;

/**
 * A typed view over the bytes, without copying when aligned; FP16/BF16 come
 * back as Uint16Array (their raw bits), BOOL as Uint8Array.
 */
export function typedView(dt: Datatype, bytes: Uint8Array): TypedArray {
  const size = SIZE[dt] || 1;
  const aligned = bytes.byteOffset % size === 0;
  const src = aligned ? bytes : bytes.slice();
  const { buffer, byteOffset } = src;
  const n = src.byteLength / size;
  switch (dt) {
    case 'BOOL':
    case 'UINT8':
    case 'BYTES':
      return src;
    case 'INT8':
      return new Int8Array(buffer, byteOffset, n);
    case 'UINT16':
    case 'FP16':
    case 'BF16':
      return new Uint16Array(buffer, byteOffset, n);
    case 'INT16':
      return new Int16Array(buffer, byteOffset, n);
    case 'UINT32':
      return new Uint32Array(buffer, byteOffset, n);
    case 'INT32':
      return new Int32Array(buffer, byteOffset, n);
    case 'UINT64':
      return new BigUint64Array(buffer, byteOffset, n);
    case 'INT64':
      return new BigInt64Array(buffer, byteOffset, n);
    case 'FP32':
      return new Float32Array(buffer, byteOffset, n);
    case 'FP64':
      return new Float64Array(buffer, byteOffset, n);
  }
}

/** Serialize strings/byte strings as Triton BYTES (4-byte LE length + bytes each). */
export function serializeBytes(items: ReadonlyArray<Uint8Array | string>): Uint8Array {
  const enc = new TextEncoder();
  const parts = items.map((x) => (typeof x === 'string' ? enc.encode(x) : x));
  const total = parts.reduce((n, p) => n + 4 + p.byteLength, 0);
  const out = new Uint8Array(total);
  const dv = new DataView(out.buffer);
  let o = 0;
  for (const p of parts) {
    dv.setUint32(o, p.byteLength, true);
    out.set(p, o + 4);
    o += 4 + p.byteLength;
  }
  return out;
}

/** Split a Triton BYTES buffer into its elements (views, no copy); throws naming the tensor when malformed. */
export function deserializeBytes(buf: Uint8Array, tensorName = 'tensor'): Uint8Array[] {
  const out: Uint8Array[] = [];
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  let o = 0;
  while (o < buf.byteLength) {
    if (o + 4 > buf.byteLength) throw invalidArg(`unexpected end of BYTES data for '${tensorName}'`);
    const len = dv.getUint32(o, true);
    if (o + 4 + len > buf.byteLength) throw invalidArg(`BYTES element length ${len} overruns the data of '${tensorName}'`);
    out.push(buf.subarray(o + 4, o + 4 + len));
    o += 4 + len;
  }
  return out;
}

/** Half-precision bits to number (for JSON output of FP16). */
export function fp16ToNumber(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const f = h & 0x3ff;
  if (e === 0) return s * 2 ** -14 * (f / 1024);
  if (e === 31) return f ? NaN : s * Infinity;
  return s * 2 ** (e - 15) * (1 + f / 1024);
}

/** Number to half-precision bits (round to nearest even). */
export function numberToFp16(v: number): number {
  const f32 = new Float32Array([v]);
  const x = new Uint32Array(f32.buffer)[0]!;
  const sign = (x >>> 16) & 0x8000;
  let e = ((x >>> 23) & 0xff) - 127 + 15;
  let m = x & 0x7fffff;
  if (((x >>> 23) & 0xff) === 0xff) return sign | 0x7c00 | (m ? 0x200 : 0);
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    m = (m | 0x800000) >> (1 - e);
    return sign | ((m + 0x1000) >> 13);
  }
  const r = sign | (e << 10) | (m >> 13);
  return (m & 0x1fff) > 0x1000 || ((m & 0x1fff) === 0x1000 && r & 1) ? r + 1 : r;
}

/** bfloat16 bits to number. */
export function bf16ToNumber(h: number): number {
  return new Float32Array(new Uint32Array([h << 16]).buffer)[0]!;
}
/** Number to bfloat16 bits (round to nearest even). */
export function numberToBf16(v: number): number {
  const x = new Uint32Array(new Float32Array([v]).buffer)[0]!;
  return ((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) & 0xffff;
}
