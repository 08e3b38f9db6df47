// InferParameter's int64_param / uint64_param exact past 2^53. protobufjs is
// set up to give 64-bit integers as JS numbers (index.ts), which round past
// 2^53; a correlation ID (`sequence_id`) is a uint64 that must stay exact.
// The type's decoder is wrapped: the generated one runs first, and only a
// value that came out unsafe is read again from its bytes, as a bigint. The
// encoder takes a bigint too. Every other value stays a number.
import protobuf from 'protobufjs';

const INT64_FIELD = 2;
const UINT64_FIELD = 5;

type Decoded = { int64_param?: number | bigint; uint64_param?: number | bigint };
type Decode = (r: protobuf.Reader | Uint8Array, l?: number) => protobuf.Message;
type Encode = (m: object, w?: protobuf.Writer) => protobuf.Writer;

const unsafe = (v: unknown) => typeof v === 'number' && !Number.isSafeInteger(v);

/** Read a base-128 varint at `pos` of `buf` as an unsigned 64-bit bigint; returns it and the next position. */
function varint64(buf: Uint8Array, pos: number): [bigint, number] {
  let v = 0n;
  for (let shift = 0n; shift < 70n; shift += 7n) {
    const b = buf[pos++];
    if (b === undefined) throw new Error('truncated varint in InferParameter');
    v |= BigInt(b & 0x7f) << shift;
    if (b < 0x80) return [BigInt.asUintN(64, v), pos];
  }
  throw new Error('varint longer than 10 bytes in InferParameter');
}

/** The last int64 / uint64 values encoded in `buf[start, end)` (an InferParameter's bytes), exactly. */
function exactValues(buf: Uint8Array, start: number, end: number): { int64?: bigint; uint64?: bigint } {
  const out: { int64?: bigint; uint64?: bigint } = {};
  let pos = start;
  while (pos < end) {
    const [tag, p] = varint64(buf, pos);
    pos = p;
    const field = Number(tag >> 3n);
    switch (Number(tag & 7n)) {
      case 0: {
        const [v, q] = varint64(buf, pos);
        pos = q;
        if (field === INT64_FIELD) out.int64 = BigInt.asIntN(64, v);
        else if (field === UINT64_FIELD) out.uint64 = v;
        break;
      }
      case 1:
        pos += 8;
        break;
      case 2: {
        const [len, q] = varint64(buf, pos);
        pos = q + Number(len);
        break;
      }
      case 5:
        pos += 4;
        break;
      default:
        throw new Error(`wire type ${tag & 7n} in InferParameter`);
    }
  }
  return out;
}

/** `{low, high}`: what protobufjs's writer takes for a 64-bit integer without Long. */
function longBits(v: bigint): { low: number; high: number } {
  const u = BigInt.asUintN(64, v);
  return { low: Number(u & 0xffffffffn), high: Number(u >> 32n) };
}

/** Make `t` (inference.InferParameter) decode and encode int64/uint64 past 2^53 exactly (as bigint). */
export function exactInt64Parameters(t: protobuf.Type): void {
  t.setup();
  const decode = t.decode as Decode;
  const encode = t.encode as Encode;
  t.decode = function decodeExact(r: protobuf.Reader | Uint8Array, l?: number) {
    const reader = r instanceof protobuf.Reader ? r : protobuf.Reader.create(r);
    const start = reader.pos;
    const m = decode.call(t, reader, l) as protobuf.Message & Decoded;
    if (unsafe(m.int64_param) || unsafe(m.uint64_param)) {
      const exact = exactValues(reader.buf, start, reader.pos);
      if (unsafe(m.int64_param) && exact.int64 !== undefined) m.int64_param = exact.int64;
      if (unsafe(m.uint64_param) && exact.uint64 !== undefined) m.uint64_param = exact.uint64;
    }
    return m;
  } as typeof t.decode;
  t.encode = function encodeExact(m: object, w?: protobuf.Writer) {
    const d = m as Decoded;
    if (typeof d.int64_param !== 'bigint' && typeof d.uint64_param !== 'bigint') return encode.call(t, m, w);
    const copy: Record<string, unknown> = { ...m };
    if (typeof d.int64_param === 'bigint') copy.int64_param = longBits(d.int64_param);
    if (typeof d.uint64_param === 'bigint') copy.uint64_param = longBits(d.uint64_param);
    return encode.call(t, copy, w);
  } as typeof t.encode;
}
