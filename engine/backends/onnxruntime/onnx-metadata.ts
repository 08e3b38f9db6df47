// Reads an ONNX file's graph inputs/outputs (names, element types, dims)
// without creating a session, for config auto-complete and checks at load.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import type { IOInfo } from '../../api/backend.ts';
import type { Datatype } from '../../api/datatypes.ts';
import { invalidArg } from '../../api/status.ts';

const require = createRequire(import.meta.url);

// onnx.TensorProto.DataType numbers.
const ELEM: Record<number, Datatype> = {
  1: 'FP32', 2: 'UINT8', 3: 'INT8', 4: 'UINT16', 5: 'INT16', 6: 'INT32', 7: 'INT64', 8: 'BYTES',
  9: 'BOOL', 10: 'FP16', 11: 'FP64', 12: 'UINT32', 13: 'UINT64', 16: 'BF16',
};

interface ValueInfo {
  name: string;
  type?: { tensorType?: { elemType?: number; shape?: { dim?: Array<{ dimValue?: number | { toNumber(): number }; dimParam?: string }> } } };
}

function info(v: ValueInfo): IOInfo | undefined {
  const tt = v.type?.tensorType;
  const dt = tt?.elemType !== undefined ? ELEM[tt.elemType] : undefined;
  if (!dt) return undefined;
  const shape = (tt?.shape?.dim ?? []).map((d) => {
    const n = typeof d.dimValue === 'object' && d.dimValue ? d.dimValue.toNumber() : Number(d.dimValue ?? 0);
    return d.dimParam || !n ? -1 : n;
  });
  return { name: v.name, datatype: dt, shape };
}

/** Graph inputs (minus initializers) and outputs of an ONNX model file. */
export function readOnnxIO(file: string): { inputs: IOInfo[]; outputs: IOInfo[] } {
  const { onnx } = require('onnx-proto') as { onnx: { ModelProto: { decode(b: Uint8Array): { graph?: { input?: ValueInfo[]; output?: ValueInfo[]; initializer?: Array<{ name: string }> } } } } };
  let model;
  try {
    model = onnx.ModelProto.decode(fs.readFileSync(file));
  } catch (err) {
    throw invalidArg(`${file}: not a valid ONNX model (${(err as Error).message})`);
  }
  const g = model.graph ?? {};
  const init = new Set((g.initializer ?? []).map((i) => i.name));
  const inputs = (g.input ?? []).filter((i) => !init.has(i.name)).flatMap((v) => info(v) ?? []);
  const outputs = (g.output ?? []).flatMap((v) => info(v) ?? []);
  return { inputs, outputs };
}
