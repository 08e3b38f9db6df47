// JSON <-> tensor bytes for the KServe v2 REST protocol: an input's `data`
// (flat or nested row-major array) becomes little-endian bytes; an output's
// bytes become the JSON text of its flat `data` array. Pure functions.
import { isUtf8 } from 'node:buffer';
import { decodeValues, deserializeBytes, encodeValues, TensorValueError } from '../../../protocol/tensor-codec.ts';
import { elementCount, elementSize, typedView, type Datatype } from '../../api/datatypes.ts';
import { invalidArg } from '../../api/status.ts';
import { numbersJson } from '../../../native/index.ts';

/**
 * Deepest nesting of `data` accepted. A tensor's rank is small; a body nested
 * thousands deep would otherwise overflow the stack in the walk below (a 500).
 */
export const MAX_DATA_NESTING = 64;

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
  const walk = (a: unknown[], depth: number): void => {
    if (depth > MAX_DATA_NESTING) throw invalidArg(`'data' of input '${tensor}' is nested deeper than ${MAX_DATA_NESTING} levels`);
    for (const x of a) {
      if (Array.isArray(x)) walk(x, depth + 1);
      else out.push(x);
    }
  };
  walk(data, 1);
  return out;
}

function badElement(tensor: string, dt: Datatype, i: number, v: unknown): Error {
  const shown = typeof v === 'bigint' ? String(v) : (JSON.stringify(v) ?? String(v));
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
    throw invalidArg(`input '${tensor}' has ${flat.length} elements in 'data' but shape [${shape.join(',')}] needs ${expected}`);
  }
  try {
    return encodeValues(datatype, flat);
  } catch (err) {
    if (err instanceof TensorValueError) throw badElement(tensor, datatype, err.index, err.value);
    throw invalidArg((err as Error).message);
  }
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
      checkUtf8(tensor, bytes);
      return JSON.stringify(decodeOrInvalid(datatype, bytes, tensor));
    case 'BOOL':
      return JSON.stringify(decodeOrInvalid(datatype, bytes, tensor));
    case 'FP16':
    case 'BF16':
      return `[${decodeOrInvalid(datatype, bytes, tensor)
        .map((v) => numText(v as number))
        .join(',')}]`;
    case 'FP32':
    case 'FP64':
      // The same text as joining the numbers (null for NaN and the infinities), in about half the time.
      return numbersJson(typedView(datatype, bytes) as Float32Array | Float64Array);
    default:
      return `[${typedView(datatype, bytes).join(',')}]`;
  }
}

/**
 * JSON strings are Unicode: an element that is not UTF-8 cannot be sent in
 * `data` without changing it (Triton's client fails to read such a body).
 * Refuse it, saying how to get the bytes instead.
 */
function checkUtf8(tensor: string, bytes: Uint8Array): void {
  let elements: Uint8Array[];
  try {
    elements = deserializeBytes(bytes, tensor);
  } catch (err) {
    throw invalidArg((err as Error).message);
  }
  for (let i = 0; i < elements.length; i++) {
    if (!isUtf8(elements[i]!)) {
      throw invalidArg(
        `element ${i} of BYTES output '${tensor}' is not valid UTF-8 and cannot be sent as JSON; request the output with 'binary_data': true`,
      );
    }
  }
}

function decodeOrInvalid(datatype: Datatype, bytes: Uint8Array, tensor: string): Array<number | boolean | string> {
  try {
    return decodeValues(datatype, bytes, tensor);
  } catch (err) {
    throw invalidArg((err as Error).message);
  }
}
