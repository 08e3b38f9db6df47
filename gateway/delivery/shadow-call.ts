// Shadow traffic: after the client has its stable answer, the same inputs go
// to the shadow target; its latency, failure and difference from the stable
// outputs are recorded, its answer dropped. The client never waits for it:
// the mirror starts after the stable call resolved, runs on copied input
// bytes (the call's staging slices go back to the arena at once), and at most
// `maxInFlight` shadows run at a time — past that a mirror is skipped and
// counted, so a slow shadow cannot pile up memory or sockets.
import type { ModelInferResponse } from '../../client/grpc-client.ts';
import type { ResolvedFunction, TensorSpec } from '../calls/function-registry.ts';
import type { InputTensor, OutputTensor } from '../calls/payload-codec.ts';

/** How the stable and shadow outputs differ. */
export interface OutputDiff {
  /** Largest |stable - shadow| over the numeric elements of every output (0 when equal). */
  maxAbsDiff: number;
  /** True when an output is missing, or its shape, datatype or (non-numeric) bytes differ. */
  mismatch: boolean;
}

const READERS: Record<string, (v: DataView, i: number) => number> = {
  FP32: (v, i) => v.getFloat32(i * 4, true),
  FP64: (v, i) => v.getFloat64(i * 8, true),
  INT32: (v, i) => v.getInt32(i * 4, true),
  INT16: (v, i) => v.getInt16(i * 2, true),
  INT8: (v, i) => v.getInt8(i),
  UINT8: (v, i) => v.getUint8(i),
  UINT16: (v, i) => v.getUint16(i * 2, true),
  UINT32: (v, i) => v.getUint32(i * 4, true),
  INT64: (v, i) => Number(v.getBigInt64(i * 8, true)),
  UINT64: (v, i) => Number(v.getBigUint64(i * 8, true)),
};
const SIZES: Record<string, number> = {
  FP32: 4,
  FP64: 8,
  INT32: 4,
  INT16: 2,
  INT8: 1,
  UINT8: 1,
  UINT16: 2,
  UINT32: 4,
  INT64: 8,
  UINT64: 8,
};

/** Compare two tensors' bytes element by element (pure). */
export function diffTensor(datatype: string, a: Uint8Array, b: Uint8Array): OutputDiff {
  if (a.byteLength !== b.byteLength) return { maxAbsDiff: Infinity, mismatch: true };
  const read = READERS[datatype];
  if (!read) return { maxAbsDiff: 0, mismatch: !Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(b) };
  const va = new DataView(a.buffer, a.byteOffset, a.byteLength);
  const vb = new DataView(b.buffer, b.byteOffset, b.byteLength);
  let max = 0;
  for (let i = 0, n = a.byteLength / SIZES[datatype]!; i < n; i++) {
    const d = Math.abs(read(va, i) - read(vb, i));
    if (!(d <= max)) max = d; // NaN counts as the largest difference
  }
  return { maxAbsDiff: Number.isNaN(max) ? Infinity : max, mismatch: false };
}

/** Compare the stable outputs with the shadow's reply, output by output (by engine tensor name). */
export function diffOutputs(stable: OutputTensor[], shadow: ModelInferResponse): OutputDiff {
  const raw = shadow.raw_output_contents ?? [];
  let max = 0;
  let mismatch = false;
  for (const o of stable) {
    const k = shadow.outputs.findIndex((x) => x.name === o.spec.tensor);
    const t = shadow.outputs[k];
    if (!t || t.datatype !== o.datatype || (t.shape ?? []).map(Number).join(',') !== o.shape.join(',')) {
      mismatch = true;
      continue;
    }
    const d = diffTensor(o.datatype, o.bytes, raw[k] ?? new Uint8Array(0));
    mismatch ||= d.mismatch;
    max = Math.max(max, d.maxAbsDiff);
  }
  return { maxAbsDiff: max, mismatch };
}

/** Copy inputs out of staging slices (the mirror outlives the call). */
export function copyInputs(inputs: InputTensor[]): InputTensor[] {
  return inputs.map((t) => ({ spec: t.spec, shape: [...t.shape], bytes: Uint8Array.from(t.bytes) }));
}

/** The ModelInfer request of a mirror: the shadow's model, the stable call's tensors, every output asked for inline. */
export function shadowRequest(shadow: ResolvedFunction, id: string, inputs: InputTensor[], specs: TensorSpec[]) {
  return {
    model_name: shadow.model,
    model_version: shadow.version,
    id: `${id}.shadow`,
    inputs: inputs.map((t) => ({ name: t.spec.tensor, datatype: t.spec.datatype, shape: t.shape })),
    outputs: specs.map((s) => ({ name: s.tensor })),
    raw_input_contents: inputs.map((t) => t.bytes),
  };
}
