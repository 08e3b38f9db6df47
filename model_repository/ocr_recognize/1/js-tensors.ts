// Tensor shapes of the JS backend as the OCR models see them (inputs,
// outputs, ctx.infer), and a float view of tensor bytes: shared by
// ocr_recognize and ocr_stream.

export interface InTensor {
  datatype: string;
  shape: number[];
  data: Uint8Array;
}
export type OutTensor = { datatype: string; shape: number[]; data: ArrayBufferView };
export type Infer = (call: {
  model: string;
  inputs: Array<{ name: string; datatype: string; shape: number[]; data: ArrayBufferView }>;
  outputs?: string[];
}) => Promise<{ outputs: Record<string, InTensor> }>;

/** A float32 view of tensor bytes (copied when the bytes are not 4-byte aligned). */
export function floats(t: InTensor): Float32Array {
  const d = t.data;
  if (d.byteOffset % 4 === 0) return new Float32Array(d.buffer, d.byteOffset, d.byteLength / 4);
  return new Float32Array(Uint8Array.from(d).buffer);
}
