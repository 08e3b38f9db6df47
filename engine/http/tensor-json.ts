// JSON <-> tensor bytes for the KServe v2 REST protocol: an input's `data`
// (flat or nested row-major array) becomes little-endian bytes; an output's
// bytes become the JSON text of its flat `data` array. Pure functions.
import {
  deserializeBytes,
  elementCount,
  elementSize,
  fp16ToNumber,
  bf16ToNumber,
  numberToBf16,
  numberToFp16,
  serializeBytes,
  typedView,
  type Datatype,
} from '../datatypes.ts';
import { invalidArg } from '../status.ts';

const INT_RANGE: Partial<Record<Datatype, [number, number]>> = {
  INT8: [-128, 127],
  INT16: [-32768, 32767],
  INT32: [-2147483648, 2147483647],
  UINT8: [0, 255],
  UINT16: [0, 65535],
  UINT32: [0, 4294967295],
  INT64: [-Number.MAX_VALUE, Number.MAX_VALUE],
  UINT64: [0, Number.MAX_VALUE],
};

/** Flatten a nested row-major JSON array (no copy when already flat). */
export function flattenData(data: unknown, tensor: string): unknown[] {
  if (!Array.isArray(data)) throw invalidArg(`'data' of input '${tensor}' must be an array`);
  let nested = false;
  for (let i = 0; i < data.length; i++) {
    if (Array.isArray(data[i])) {
      nested = true;
      break;
    }
  }
  if (!nested) return data;
  const out: unknown[] = [];
  const walk = (a: unknown[]): void => {
    for (const x of a) {
      if (Array.isArray(x)) walk(x);
      else out.push(x);
    }
  };
  walk(data);
  return out;
}

function badElement(tensor: string, dt: Datatype, i: number, v: unknown): Error {
  const shown = JSON.stringify(v) ?? String(v);
  return invalidArg(`element ${i} of input '${tensor}' is not a valid ${dt} value: ${shown.slice(0, 40)}`);
}

/**
 * Encode an input's JSON `data` as tensor bytes, checking that the element
 * count matches `shape` and that each element fits `datatype`.
 */
export function jsonToTensorBytes(tensor: string, datatype: Datatype, shape: readonly number[], data: unknown): Uint8Array {
  const flat = flattenData(data, tensor);
  const expected = elementCount(shape);
  if (flat.length !== expected) {
    throw invalidArg(
      `input '${tensor}' has ${flat.length} elements in 'data' but shape [${shape.join(',')}] needs ${expected}`,
    );
  }
  if (datatype === 'BYTES') {
    for (let i = 0; i < flat.length; i++) {
      if (typeof flat[i] !== 'string') throw badElement(tensor, datatype, i, flat[i]);
    }
    return serializeBytes(flat as string[]);
  }
  const out = new Uint8Array(expected * elementSize(datatype));
  if (datatype === 'BOOL') {
    for (let i = 0; i < flat.length; i++) {
      const v = flat[i];
      if (typeof v !== 'boolean') throw badElement(tensor, datatype, i, v);
      out[i] = v ? 1 : 0;
    }
    return out;
  }
  const view = typedView(datatype, out);
  const range = INT_RANGE[datatype];
  const isBig = datatype === 'INT64' || datatype === 'UINT64';
  for (let i = 0; i < flat.length; i++) {
    const v = flat[i];
    if (typeof v !== 'number' || Number.isNaN(v)) throw badElement(tensor, datatype, i, v);
    if (range) {
      if (!Number.isInteger(v) || v < range[0] || v > range[1]) throw badElement(tensor, datatype, i, v);
      if (isBig) (view as BigInt64Array)[i] = BigInt(v);
      else (view as Int32Array)[i] = v;
    } else if (datatype === 'FP16') {
      (view as Uint16Array)[i] = numberToFp16(v);
    } else if (datatype === 'BF16') {
      (view as Uint16Array)[i] = numberToBf16(v);
    } else {
      (view as Float32Array)[i] = v;
    }
  }
  return out;
}

/** JSON text of one number; non-finite values (not JSON) become null. */
const numText = (v: number): string => (Number.isFinite(v) ? String(v) : 'null');

/**
 * The JSON text of an output's flat `data` array. INT64/UINT64 are written as
 * exact integers; BYTES elements as strings (UTF-8 decoded).
 */
export function tensorBytesToJson(tensor: string, datatype: Datatype, bytes: Uint8Array): string {
  const size = elementSize(datatype);
  if (size > 1 && bytes.byteLength % size !== 0) {
    throw invalidArg(`output '${tensor}' has ${bytes.byteLength} bytes, not a multiple of its ${datatype} element size`);
  }
  switch (datatype) {
    case 'BYTES':
      return JSON.stringify(deserializeBytes(bytes, tensor).map((b) => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('utf8')));
    case 'BOOL': {
      const parts = new Array<string>(bytes.length);
      for (let i = 0; i < bytes.length; i++) parts[i] = bytes[i] ? 'true' : 'false';
      return `[${parts.join(',')}]`;
    }
    case 'FP16':
    case 'BF16': {
      const v = typedView(datatype, bytes) as Uint16Array;
      const conv = datatype === 'FP16' ? fp16ToNumber : bf16ToNumber;
      const parts = new Array<string>(v.length);
      for (let i = 0; i < v.length; i++) parts[i] = numText(conv(v[i]!));
      return `[${parts.join(',')}]`;
    }
    case 'FP32':
    case 'FP64': {
      const v = typedView(datatype, bytes) as Float32Array | Float64Array;
      let finite = true;
      for (let i = 0; i < v.length && finite; i++) finite = Number.isFinite(v[i]!);
      if (finite) return `[${v.join(',')}]`;
      return `[${Array.from(v, numText).join(',')}]`;
    }
    default:
      return `[${typedView(datatype, bytes).join(',')}]`;
  }
}
