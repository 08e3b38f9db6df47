// KServe v2 datatypes for the engine: the shared codec of protocol/ (sizes,
// typed views, BYTES framing, FP16/BF16), plus what only the engine needs:
// the config enum names (TYPE_*) and StatusError INVALID_ARG on bad data.
import { deserializeBytes as splitBytes, elementCount, elementSize, isDatatype, type Datatype } from '../../protocol/tensor-codec.ts';
import { invalidArg } from './status.ts';

export {
  DATATYPES,
  bf16ToNumber,
  elementCount,
  elementSize,
  fp16ToNumber,
  isDatatype,
  numberToBf16,
  numberToFp16,
  serializeBytes,
  typedView,
  type Datatype,
  type TypedArray,
} from '../../protocol/tensor-codec.ts';

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

/** Expected byte size of a fixed-size tensor, or -1 for BYTES. */
export function byteSizeOf(dt: Datatype, shape: readonly number[]): number {
  return dt === 'BYTES' ? -1 : elementSize(dt) * elementCount(shape);
}

/** Split a Triton BYTES buffer into its elements (views, no copy); INVALID_ARG naming the tensor when malformed. */
export function deserializeBytes(buf: Uint8Array, tensorName = 'tensor'): Uint8Array[] {
  try {
    return splitBytes(buf, tensorName);
  } catch (err) {
    throw invalidArg((err as Error).message);
  }
}
