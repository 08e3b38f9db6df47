// ONNX Runtime element types <-> KServe datatypes.
import type { Datatype } from '../../../protocol/tensor-codec.ts';

const TO_ORT: Partial<Record<Datatype, string>> = {
  BOOL: 'bool',
  UINT8: 'uint8',
  UINT16: 'uint16',
  UINT32: 'uint32',
  UINT64: 'uint64',
  INT8: 'int8',
  INT16: 'int16',
  INT32: 'int32',
  INT64: 'int64',
  FP16: 'float16',
  FP32: 'float32',
  FP64: 'float64',
  BYTES: 'string',
};

const FROM_ORT: Record<string, Datatype> = Object.fromEntries(Object.entries(TO_ORT).map(([dt, o]) => [o, dt as Datatype]));

/** The ORT element type of a datatype, or undefined (BF16 has none in onnxruntime-node). */
export function ortTypeOf(dt: Datatype): string | undefined {
  return TO_ORT[dt];
}

/** The datatype of an ORT element type, or undefined. */
export function datatypeOfOrt(t: string): Datatype | undefined {
  return FROM_ORT[t];
}
