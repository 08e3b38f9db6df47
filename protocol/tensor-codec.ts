// KServe v2 tensor data, the one copy both sides read (engine, gateway,
// client): the datatypes and their element sizes, typed views, Triton's BYTES
// framing (4-byte little-endian length + bytes per element), FP16/BF16 bits
// <-> numbers, and flat JSON values <-> tensor bytes. Pure functions, no
// imports; typed views use the host's byte order, little-endian on every
// platform Node runs here, as the wire format wants. Failures throw plain
// Errors whose messages name the element or tensor; callers wrap them in their
// own error types (the engine's StatusError, the gateway's INPUT_INVALID).

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

/** Bytes of one element of each datatype; 0 for BYTES (variable). */
export const DATATYPE_SIZES: Readonly<Record<Datatype, number>> = {
  BOOL: 1,
  UINT8: 1,
  UINT16: 2,
  UINT32: 4,
  UINT64: 8,
  INT8: 1,
  INT16: 2,
  INT32: 4,
  INT64: 8,
  FP16: 2,
  BF16: 2,
  FP32: 4,
  FP64: 8,
  BYTES: 0,
};

export const DATATYPES: readonly Datatype[] = Object.keys(DATATYPE_SIZES) as Datatype[];

export function isDatatype(s: string): s is Datatype {
  return Object.hasOwn(DATATYPE_SIZES, s);
}

/** Size of one element in bytes; 0 for BYTES (variable) and for unknown names. */
export function elementSize(dt: string): number {
  return isDatatype(dt) ? DATATYPE_SIZES[dt] : 0;
}

/** Number of elements of a shape (1 for a scalar shape []). */
export function elementCount(shape: readonly number[]): number {
  let n = 1;
  for (let i = 0; i < shape.length; i++) n *= shape[i]!;
  return n;
}

export type TypedArray =
  | Uint8Array
  | Int8Array
  | Uint16Array
  | Int16Array
  | Uint32Array
  | Int32Array
  | BigUint64Array
  | BigInt64Array
  | Float32Array
  | Float64Array;

/**
 * A typed view over the bytes, without copying when aligned (a copy
 * otherwise); FP16/BF16 come back as Uint16Array (their raw bits), BOOL and
 * BYTES as Uint8Array.
 */
export function typedView(dt: Datatype, bytes: Uint8Array): TypedArray {
  const size = DATATYPE_SIZES[dt] || 1;
  // A fresh copy when unaligned (not bytes.slice(): on a Buffer that is a view).
  const src = bytes.byteOffset % size === 0 ? bytes : new Uint8Array(bytes);
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
  const out = new Uint8Array(parts.reduce((n, p) => n + 4 + p.byteLength, 0));
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
    if (o + 4 > buf.byteLength) throw new Error(`unexpected end of BYTES data for '${tensorName}'`);
    const len = dv.getUint32(o, true);
    if (o + 4 + len > buf.byteLength) throw new Error(`BYTES element length ${len} overruns the data of '${tensorName}'`);
    out.push(buf.subarray(o + 4, o + 4 + len));
    o += 4 + len;
  }
  return out;
}

/** Half-precision bits to number. */
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
  const x = new Uint32Array(new Float32Array([v]).buffer)[0]!;
  const sign = (x >>> 16) & 0x8000;
  const e = ((x >>> 23) & 0xff) - 127 + 15;
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

/** One element that does not fit its datatype: which one, and its value. */
export class TensorValueError extends Error {
  constructor(
    message: string,
    readonly index: number,
    readonly value: unknown,
  ) {
    super(message);
    this.name = 'TensorValueError';
  }
}

// Integer datatypes: [lowest, one past the highest] as exact doubles.
const INT_RANGE: Partial<Record<Datatype, readonly [number, number]>> = {
  INT8: [-(2 ** 7), 2 ** 7],
  INT16: [-(2 ** 15), 2 ** 15],
  INT32: [-(2 ** 31), 2 ** 31],
  INT64: [-(2 ** 63), 2 ** 63],
  UINT8: [0, 2 ** 8],
  UINT16: [0, 2 ** 16],
  UINT32: [0, 2 ** 32],
  UINT64: [0, 2 ** 64],
};

export interface EncodeOptions {
  /** Accept 0 and 1 as BOOL elements besides true and false. */
  boolFromNumbers?: boolean;
}

/**
 * Encode flat JSON values as the bytes of a tensor of `dt`: BYTES elements
 * must be strings, BOOL booleans, the others numbers (integers in range for
 * the integer types). Throws a TensorValueError naming the offending element,
 * or an Error for an unknown datatype.
 */
export function encodeValues(dt: string, values: readonly unknown[], opts: EncodeOptions = {}): Uint8Array {
  if (!isDatatype(dt)) throw new Error(`unsupported datatype '${dt}'`);
  if (dt === 'BYTES') {
    for (let i = 0; i < values.length; i++) {
      if (typeof values[i] !== 'string') throw new TensorValueError(`element ${i} must be a string for BYTES`, i, values[i]);
    }
    return serializeBytes(values as readonly string[]);
  }
  const out = new Uint8Array(values.length * DATATYPE_SIZES[dt]);
  if (dt === 'BOOL') {
    for (let i = 0; i < values.length; i++) {
      const v = values[i];
      if (typeof v !== 'boolean' && !(opts.boolFromNumbers && (v === 0 || v === 1))) {
        throw new TensorValueError(`element ${i} must be a boolean`, i, v);
      }
      out[i] = v ? 1 : 0;
    }
    return out;
  }
  const view = typedView(dt, out);
  const range = INT_RANGE[dt];
  const big = dt === 'INT64' || dt === 'UINT64';
  for (let i = 0; i < values.length; i++) {
    let v = values[i];
    // A bigint (an integer literal past 2^53 read exactly): INT64/UINT64 keep it exact, floats take the nearest number.
    if (typeof v === 'bigint') {
      if (big) {
        const [lo, hi] = dt === 'INT64' ? [-(2n ** 63n), 2n ** 63n] : [0n, 2n ** 64n];
        if (v < lo || v >= hi) throw new TensorValueError(`element ${i} (${v}) is out of range for ${dt}`, i, v);
        (view as BigInt64Array)[i] = v;
        continue;
      }
      if (range) throw new TensorValueError(`element ${i} (${v}) is out of range for ${dt}`, i, v);
      v = Number(v);
    }
    if (typeof v !== 'number' || Number.isNaN(v)) throw new TensorValueError(`element ${i} must be a number`, i, v);
    if (range) {
      if (!Number.isInteger(v)) throw new TensorValueError(`element ${i} (${v}) must be an integer for ${dt}`, i, v);
      if (v < range[0] || v >= range[1]) throw new TensorValueError(`element ${i} (${v}) is out of range for ${dt}`, i, v);
      if (big) (view as BigInt64Array)[i] = BigInt(v);
      else (view as Int32Array)[i] = v;
    } else if (dt === 'FP16') {
      (view as Uint16Array)[i] = numberToFp16(v);
    } else if (dt === 'BF16') {
      (view as Uint16Array)[i] = numberToBf16(v);
    } else {
      (view as Float32Array)[i] = v;
    }
  }
  return out;
}

const utf8 = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('utf8');

/**
 * Decode the bytes of a tensor of `dt` into flat JSON values: BYTES as UTF-8
 * strings, BOOL as booleans, FP16/BF16 as numbers, INT64/UINT64 as numbers
 * (exact up to 2^53). Trailing bytes short of one element are ignored.
 */
export function decodeValues(dt: string, bytes: Uint8Array, tensorName?: string): Array<number | boolean | string> {
  if (!isDatatype(dt)) throw new Error(`unsupported datatype '${dt}'`);
  switch (dt) {
    case 'BYTES':
      return deserializeBytes(bytes, tensorName).map(utf8);
    case 'BOOL':
      return Array.from(bytes, (b) => b !== 0);
    case 'FP16':
      return Array.from(typedView(dt, bytes) as Uint16Array, fp16ToNumber);
    case 'BF16':
      return Array.from(typedView(dt, bytes) as Uint16Array, bf16ToNumber);
    case 'INT64':
    case 'UINT64':
      return Array.from(typedView(dt, bytes) as BigInt64Array, Number);
    default:
      return Array.from(typedView(dt, bytes) as Float64Array);
  }
}
