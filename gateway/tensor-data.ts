// KServe v2 datatypes as the gateway sees them: element sizes, JSON values to
// little-endian bytes and back, Triton's BYTES framing (4-byte LE length +
// bytes per element). The gateway keeps its own copy so it never imports the
// engine (it must work against a real Triton too).

export const DATATYPE_SIZES: Readonly<Record<string, number>> = {
  BOOL: 1, UINT8: 1, UINT16: 2, UINT32: 4, UINT64: 8, INT8: 1, INT16: 2, INT32: 4, INT64: 8,
  FP16: 2, BF16: 2, FP32: 4, FP64: 8, BYTES: 0,
};

export function isDatatype(s: string): boolean {
  return s in DATATYPE_SIZES;
}

/** Bytes of one element; 0 for BYTES (variable). */
export function elementSize(dt: string): number {
  return DATATYPE_SIZES[dt] ?? 0;
}

export function elementCount(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** Frame strings/byte strings as Triton BYTES. */
export function serializeBytes(items: ReadonlyArray<Uint8Array | string>): Buffer {
  const parts = items.map((x) => (typeof x === 'string' ? Buffer.from(x, 'utf8') : x));
  const out = Buffer.allocUnsafe(parts.reduce((n, p) => n + 4 + p.byteLength, 0));
  let o = 0;
  for (const p of parts) {
    out.writeUInt32LE(p.byteLength, o);
    out.set(p, o + 4);
    o += 4 + p.byteLength;
  }
  return out;
}

/** Split Triton BYTES into elements (views); throws a plain Error when malformed. */
export function deserializeBytes(buf: Uint8Array): Uint8Array[] {
  const out: Uint8Array[] = [];
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  let o = 0;
  while (o < buf.byteLength) {
    if (o + 4 > buf.byteLength) throw new Error('truncated BYTES length prefix');
    const len = dv.getUint32(o, true);
    if (o + 4 + len > buf.byteLength) throw new Error(`BYTES element of ${len} bytes overruns the data`);
    out.push(buf.subarray(o + 4, o + 4 + len));
    o += 4 + len;
  }
  return out;
}

function toFp16(v: number): number {
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
function fromFp16(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const f = h & 0x3ff;
  if (e === 0) return s * 2 ** -14 * (f / 1024);
  if (e === 31) return f ? NaN : s * Infinity;
  return s * 2 ** (e - 15) * (1 + f / 1024);
}

/**
 * Encode flat JSON values as the raw bytes of a fixed-size datatype.
 * Throws a plain Error whose message names the offending element.
 */
export function encodeValues(dt: string, values: readonly unknown[]): Buffer {
  if (dt === 'BYTES') {
    return serializeBytes(
      values.map((v, i) => {
        if (typeof v !== 'string') throw new Error(`element ${i} must be a string for BYTES`);
        return v;
      }),
    );
  }
  const size = elementSize(dt);
  if (!size) throw new Error(`unsupported datatype '${dt}'`);
  const buf = Buffer.alloc(values.length * size);
  values.forEach((v, i) => {
    const o = i * size;
    if (dt === 'BOOL') {
      if (typeof v !== 'boolean' && v !== 0 && v !== 1) throw new Error(`element ${i} must be a boolean`);
      buf[o] = v ? 1 : 0;
      return;
    }
    if (typeof v !== 'number') throw new Error(`element ${i} must be a number`);
    const isInt = !dt.startsWith('FP') && dt !== 'BF16';
    if (isInt && !Number.isInteger(v)) throw new Error(`element ${i} (${v}) must be an integer for ${dt}`);
    switch (dt) {
      case 'UINT8': return void buf.writeUInt8(v, o);
      case 'INT8': return void buf.writeInt8(v, o);
      case 'UINT16': return void buf.writeUInt16LE(v, o);
      case 'INT16': return void buf.writeInt16LE(v, o);
      case 'UINT32': return void buf.writeUInt32LE(v, o);
      case 'INT32': return void buf.writeInt32LE(v, o);
      case 'UINT64': return void buf.writeBigUInt64LE(BigInt(v), o);
      case 'INT64': return void buf.writeBigInt64LE(BigInt(v), o);
      case 'FP16': return void buf.writeUInt16LE(toFp16(v), o);
      case 'BF16': {
        const x = new Uint32Array(new Float32Array([v]).buffer)[0]!;
        return void buf.writeUInt16LE(((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) & 0xffff, o);
      }
      case 'FP32': return void buf.writeFloatLE(v, o);
      case 'FP64': return void buf.writeDoubleLE(v, o);
    }
  });
  return buf;
}

/** Decode raw bytes of a tensor into JSON values (BYTES as UTF-8 strings). */
export function decodeValues(dt: string, bytes: Uint8Array): Array<number | boolean | string> {
  if (dt === 'BYTES') return deserializeBytes(bytes).map((b) => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('utf8'));
  const size = elementSize(dt);
  const n = Math.floor(bytes.byteLength / size);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Array<number | boolean>(n);
  for (let i = 0; i < n; i++) {
    const o = i * size;
    switch (dt) {
      case 'BOOL': out[i] = dv.getUint8(o) !== 0; break;
      case 'UINT8': out[i] = dv.getUint8(o); break;
      case 'INT8': out[i] = dv.getInt8(o); break;
      case 'UINT16': out[i] = dv.getUint16(o, true); break;
      case 'INT16': out[i] = dv.getInt16(o, true); break;
      case 'UINT32': out[i] = dv.getUint32(o, true); break;
      case 'INT32': out[i] = dv.getInt32(o, true); break;
      case 'UINT64': out[i] = Number(dv.getBigUint64(o, true)); break;
      case 'INT64': out[i] = Number(dv.getBigInt64(o, true)); break;
      case 'FP16': out[i] = fromFp16(dv.getUint16(o, true)); break;
      case 'BF16': out[i] = new Float32Array(new Uint32Array([dv.getUint16(o, true) << 16]).buffer)[0]!; break;
      case 'FP32': out[i] = dv.getFloat32(o, true); break;
      case 'FP64': out[i] = dv.getFloat64(o, true); break;
      default: throw new Error(`unsupported datatype '${dt}'`);
    }
  }
  return out;
}
