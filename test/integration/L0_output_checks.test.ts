// What the engine checks of a model's outputs, per backend, on the real
// engine over HTTP: as Triton, only that each output is one the config
// declares (core's InferenceResponse::AddOutput) and, for our own safety,
// that each tensor is well formed. An onnxruntime model's output of another
// shape than the config's dims (the graph's dim is dynamic) answers as ONNX
// Runtime made it, as Triton's onnxruntime backend does; a JS model (held to
// Triton's python backend's rules) answers its datatype and shape as made,
// a requested output it left out is absent, and bytes that do not fill the
// shape it claims still fail that request (no Triton backend can make
// those). The python backend's own cases are L0_python_outputs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { RunningEngine } from '../../engine/server/server.ts';
import { GraphBuilder, ElemType } from '../../model_repository/onnx-builder.ts';
import { writeModel } from '../fixtures/test-models.ts';
import { httpJson, removeDir, startTestEngine } from './helpers.ts';

/** y = x, FP32 of any length: the graph's dim is dynamic, the config says 4. */
function buildIdentity(): Uint8Array {
  const g = new GraphBuilder('identity_any', 1);
  g.input('x', ElemType.FLOAT, ['n']);
  g.node('Identity', ['x'], {}, 'y');
  g.output('y', ElemType.FLOAT, ['n']);
  return g.build();
}

const ONNX_CONFIG = `name: "onnx_four"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "x", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "y", data_type: TYPE_FP32, dims: [ 4 ] } ]
`;

const JS_CONFIG = `name: "js_as_made"
backend: "js"
max_batch_size: 64
input [ { name: "MODE", data_type: TYPE_INT32, dims: [ -1 ] } ]
output [
  { name: "OUT", data_type: TYPE_FP32, dims: [ -1 ] },
  { name: "AUX", data_type: TYPE_INT32, dims: [ 1 ] }
]
`;

// MODE 0: OUT of shape [1] whatever the request's shape (python_test.py's test_init_args, in JS);
// 1: OUT as INT32; 2: no AUX; 3: OUT claiming [2] with the bytes of one FP32.
const JS_MODEL = `type T = { datatype: string; shape: number[]; data: Uint8Array };
export async function execute(requests: Array<{ inputs: Record<string, T> }>) {
  return requests.map((r) => {
    const mode = new Int32Array(Uint8Array.from(r.inputs.MODE!.data).buffer)[0];
    const one = new Uint8Array(new Float32Array([2.5]).buffer);
    const aux = { datatype: 'INT32', shape: [1, 1], data: new Uint8Array(new Int32Array([9]).buffer) };
    if (mode === 1) return { outputs: { OUT: { datatype: 'INT32', shape: [1], data: new Uint8Array(new Int32Array([5]).buffer) }, AUX: aux } };
    if (mode === 2) return { outputs: { OUT: { datatype: 'FP32', shape: [1], data: one } } };
    if (mode === 3) return { outputs: { OUT: { datatype: 'FP32', shape: [2], data: one }, AUX: aux } };
    return { outputs: { OUT: { datatype: 'FP32', shape: [1], data: one }, AUX: aux } };
  });
}
`;

let repo: string;
let eng: RunningEngine;

beforeAll(async () => {
  repo = mkdtempSync(path.join(os.tmpdir(), 'l0-output-checks-'));
  writeModel(repo, 'onnx_four', ONNX_CONFIG, { 'model.onnx': buildIdentity() });
  writeModel(repo, 'js_as_made', JS_CONFIG, { 'model.ts': JS_MODEL });
  eng = await startTestEngine({ modelRepository: repo });
}, 60_000);
afterAll(async () => {
  await eng?.stop();
  removeDir(repo);
});

const infer = (model: string, inputs: object[]) => httpJson(eng.httpPort, 'POST', `/v2/models/${model}/infer`, { inputs });
const jsInfer = (mode: number) => infer('js_as_made', [{ name: 'MODE', datatype: 'INT32', shape: [2, 2], data: [mode, 0, 0, 0] }]);
type Out = { name: string; datatype: string; shape: number[]; data: number[] };

describe('L0_output_checks: onnxruntime', () => {
  it("an output of another length than the config's dims answers as ONNX Runtime made it", async () => {
    const r = await infer('onnx_four', [{ name: 'x', datatype: 'FP32', shape: [3], data: [1, 2, 3] }]);
    expect(r.status).toBe(200);
    expect(r.json.outputs).toEqual([{ name: 'y', datatype: 'FP32', shape: [3], data: [1, 2, 3] }]);
  });
});

describe("L0_output_checks: js (the python backend's rules)", () => {
  it('an output of shape [1] for a [2,2] request of a batching model', async () => {
    const r = await jsInfer(0);
    expect(r.status).toBe(200);
    expect((r.json.outputs as Out[]).map((o) => [o.name, o.datatype, o.shape, o.data])).toEqual([
      ['OUT', 'FP32', [1], [2.5]],
      ['AUX', 'INT32', [1, 1], [9]],
    ]);
  });

  it('an INT32 output for an FP32 one answers as made', async () => {
    const r = await jsInfer(1);
    expect(r.status).toBe(200);
    expect((r.json.outputs as Out[])[0]).toEqual({ name: 'OUT', datatype: 'INT32', shape: [1], data: [5] });
  });

  it('a requested output the model left out is absent', async () => {
    const r = await jsInfer(2);
    expect(r.status).toBe(200);
    expect((r.json.outputs as Out[]).map((o) => o.name)).toEqual(['OUT']);
  });

  it('bytes that do not fill the shape the model claims still fail that request, naming the output', async () => {
    const r = await jsInfer(3);
    expect(r).toEqual({
      status: 400,
      json: { error: "output byte size mismatch for output 'OUT' for model 'js_as_made'. Expected 8, got 4" },
    });
    expect((await jsInfer(0)).status).toBe(200);
  });
});
