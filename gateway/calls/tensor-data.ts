// KServe v2 tensor data as the gateway uses it: the shared codec of
// protocol/tensor-codec.ts (never the engine's, so the gateway works against a
// real Triton too), returning Buffers, with BOOL also taking 0/1 from JSON.
import * as codec from '../../protocol/tensor-codec.ts';

export {
  DATATYPE_SIZES,
  decodeValues,
  deserializeBytes,
  elementCount,
  elementSize,
  isDatatype,
  typedView,
} from '../../protocol/tensor-codec.ts';

const asBuffer = (u: Uint8Array): Buffer => Buffer.from(u.buffer, u.byteOffset, u.byteLength);

/** Frame strings/byte strings as Triton BYTES. */
export function serializeBytes(items: ReadonlyArray<Uint8Array | string>): Buffer {
  return asBuffer(codec.serializeBytes(items));
}

/** Encode flat JSON values as tensor bytes; a plain Error names the offending element. */
export function encodeValues(dt: string, values: readonly unknown[]): Buffer {
  return asBuffer(codec.encodeValues(dt, values, { boolFromNumbers: true }));
}
