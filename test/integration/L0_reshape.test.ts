// Triton's `reshape` (its L0_reshape): the client speaks the config's `dims`,
// the backend sees `reshape.shape`, on inputs and outputs, batched or not,
// for ONNX Runtime, JS and Python models, alone, dynamically batched and inside an
// ensemble. Real engine, real ONNX Runtime, gRPC and HTTP over loopback.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { ElemType, GraphBuilder } from '../../model_repository/onnx-builder.ts';
import { JS_ECHO_MODEL, writeModel } from '../fixtures/test-models.ts';
import { f32Bytes, httpJson, protoLoaderClient, removeDir, startTestEngine, tempRepo, toF32, toI32, type ProtoClient } from './helpers.ts';

/** y = 2x on FP32 [batch]: a rank-1 model file, so the config's dims [1] need reshape [] to reach it. */
function buildDoubleRank1(): Uint8Array {
  const g = new GraphBuilder('double_rank1', 1);
  g.input('INPUT0', ElemType.FLOAT, ['batch']);
  g.node('Mul', ['INPUT0', g.constFloat('two', [], [2])], {}, 'OUTPUT0');
  g.output('OUTPUT0', ElemType.FLOAT, ['batch']);
  return g.build();
}

const SCALAR_CONFIG = (name: string, batching = '') => `name: "${name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 1 ], reshape: { shape: [ ] } } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 1 ], reshape: { shape: [ ] } } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
${batching}`;

/** Warm-up samples are written in the config's dims too. */
const WARMUP = `model_warmup [ { name: "w", batch_size: 2, inputs { key: "INPUT0", value: { data_type: TYPE_FP32, dims: [ 1 ], zero_data: true } } } ]
`;

/** A JS model that returns its input rows as [3, 2] and tells the shape it received. */
const SHAPE_MODEL = `type T = { datatype: string; shape: number[]; data: Uint8Array };
export async function execute(requests: Array<{ inputs: Record<string, T> }>) {
  return requests.map((r) => {
    const t = r.inputs.IN!;
    const b = t.shape[0]!;
    const seen = new Int32Array(b * 3);
    for (let i = 0; i < b; i++) seen.set([t.shape.length, t.shape[1] ?? -1, t.shape[2] ?? -1], i * 3);
    return { outputs: {
      OUT: { datatype: 'FP32', shape: [b, 3, 2], data: Uint8Array.from(t.data) },
      SEEN: { datatype: 'INT32', shape: [b, 3], data: new Uint8Array(seen.buffer) },
    } };
  });
}
`;
const SHAPE_CONFIG = `name: "js_reshape"
backend: "js"
default_model_filename: "model.ts"
max_batch_size: 4
input [ { name: "IN", data_type: TYPE_FP32, dims: [ 2, 3 ], reshape: { shape: [ 6 ] } } ]
output [
  { name: "OUT", data_type: TYPE_FP32, dims: [ 6 ], reshape: { shape: [ 3, 2 ] } },
  { name: "SEEN", data_type: TYPE_INT32, dims: [ 3 ] }
]
`;
const ENSEMBLE_CONFIG = `name: "reshape_ensemble"
platform: "ensemble"
max_batch_size: 8
input [ { name: "X", data_type: TYPE_FP32, dims: [ 1 ] } ]
output [ { name: "Y", data_type: TYPE_FP32, dims: [ 1 ] } ]
ensemble_scheduling { step [
  { model_name: "reshape_scalar" model_version: -1 input_map { key: "INPUT0" value: "X" } output_map { key: "OUTPUT0" value: "T" } },
  { model_name: "reshape_scalar_batched" model_version: -1 input_map { key: "INPUT0" value: "T" } output_map { key: "OUTPUT0" value: "Y" } }
] }
`;

/** The same as a Python model (Triton's python backend), written by the pipeline the same way. */
const PY_SHAPE_MODEL = `import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            b = x.shape[0]
            seen = np.array([[x.ndim, x.shape[1] if x.ndim > 1 else -1, x.shape[2] if x.ndim > 2 else -1]] * b, dtype=np.int32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x.reshape(b, 3, 2)), pb_utils.Tensor("SEEN", seen)]))
        return responses
`;

/** The ensemble's own reshape: clients send [batch, 2, 3], its step sees [batch, 6]. */
const OWN_RESHAPE_ENSEMBLE = `name: "reshape_own_ensemble"
platform: "ensemble"
max_batch_size: 4
input [ { name: "X", data_type: TYPE_FP32, dims: [ 2, 3 ], reshape: { shape: [ 6 ] } } ]
output [ { name: "Y", data_type: TYPE_FP32, dims: [ 2, 3 ], reshape: { shape: [ 6 ] } } ]
ensemble_scheduling { step [
  { model_name: "js_flat" model_version: -1 input_map { key: "INPUT0" value: "X" } output_map { key: "OUTPUT0" value: "Y" } }
] }
`;
const FLAT_CONFIG = `name: "js_flat"
backend: "js"
default_model_filename: "model.ts"
max_batch_size: 4
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 6 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 6 ] } ]
`;

let repo: string;
let eng: RunningEngine;
let client: ProtoClient;

beforeAll(async () => {
  repo = tempRepo('l0-reshape');
  writeModel(repo, 'reshape_scalar', SCALAR_CONFIG('reshape_scalar'), { 'model.onnx': buildDoubleRank1() });
  writeModel(
    repo,
    'reshape_scalar_batched',
    SCALAR_CONFIG('reshape_scalar_batched', WARMUP + 'dynamic_batching { max_queue_delay_microseconds: 50000 }'),
    {
      'model.onnx': buildDoubleRank1(),
    },
  );
  writeModel(repo, 'js_reshape', SHAPE_CONFIG, { 'model.ts': SHAPE_MODEL });
  writeModel(
    repo,
    'py_reshape',
    SHAPE_CONFIG.replace('"js_reshape"', '"py_reshape"').replace('backend: "js"\ndefault_model_filename: "model.ts"', 'backend: "python"'),
    { 'model.py': PY_SHAPE_MODEL },
  );
  writeModel(repo, 'reshape_ensemble', ENSEMBLE_CONFIG, {});
  writeModel(repo, 'js_flat', FLAT_CONFIG, { 'model.ts': JS_ECHO_MODEL });
  writeModel(repo, 'reshape_own_ensemble', OWN_RESHAPE_ENSEMBLE, {});
  eng = await startTestEngine({ modelRepository: repo });
  client = protoLoaderClient(eng.grpcPort);
});
afterAll(async () => {
  client?.close();
  await eng?.stop();
  removeDir(repo);
});

const scalarInfer = (model: string, values: number[]) =>
  client.call('ModelInfer', {
    model_name: model,
    inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [values.length, 1] }],
    raw_input_contents: [f32Bytes(values)],
  });

describe('L0_reshape', () => {
  it('every model loaded', async () => {
    const { json } = await httpJson(eng.httpPort, 'POST', '/v2/repository/index', {});
    expect(
      Object.fromEntries(json.map((m: { name: string; state: string; reason: string }) => [m.name, `${m.state} ${m.reason}`.trim()])),
    ).toEqual({
      js_flat: 'READY',
      js_reshape: 'READY',
      py_reshape: 'READY',
      reshape_ensemble: 'READY',
      reshape_own_ensemble: 'READY',
      reshape_scalar: 'READY',
      reshape_scalar_batched: 'READY',
    });
  });

  it('ONNX: dims [1] + reshape [] feeds a [batch] tensor and answers [batch, 1] (gRPC)', async () => {
    const r = await scalarInfer('reshape_scalar', [1.5, -2, 4]);
    expect(r.outputs[0].shape.map(Number)).toEqual([3, 1]);
    expect(Array.from(toF32(r.raw_output_contents[0]))).toEqual([3, -4, 8]);
  });

  it('ONNX: the same over HTTP JSON', async () => {
    const { status, json } = await httpJson(eng.httpPort, 'POST', '/v2/models/reshape_scalar/infer', {
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [2, 1], data: [0.25, 7] }],
    });
    expect(status).toBe(200);
    expect(json.outputs[0]).toMatchObject({ name: 'OUTPUT0', shape: [2, 1], data: [0.5, 14] });
  });

  it('ONNX + dynamic batcher: concurrent reshaped requests batch and split back', async () => {
    const rs = await Promise.all([1, 2, 3, 4, 5].map((v) => scalarInfer('reshape_scalar_batched', [v])));
    rs.forEach((r, i) => {
      expect(r.outputs[0].shape.map(Number)).toEqual([1, 1]);
      expect(Array.from(toF32(r.raw_output_contents[0]))).toEqual([2 * (i + 1)]);
    });
    const { json } = await httpJson(eng.httpPort, 'GET', '/v2/models/reshape_scalar_batched/stats');
    const stats = json.model_stats[0];
    expect(Number(stats.execution_count)).toBeLessThan(5);
  });

  it.each(['js_reshape', 'py_reshape'])(
    '%s: the model receives [batch, 6] for dims [2, 3] and its [batch, 3, 2] output comes back as [batch, 6]',
    async (model) => {
      const data = Array.from({ length: 12 }, (_, i) => i / 2);
      const r = await client.call('ModelInfer', {
        model_name: model,
        inputs: [{ name: 'IN', datatype: 'FP32', shape: [2, 2, 3] }],
        raw_input_contents: [f32Bytes(data)],
      });
      const byName = Object.fromEntries(
        r.outputs.map((o: { name: string; shape: string[] }, i: number) => [
          o.name,
          { shape: o.shape.map(Number), raw: r.raw_output_contents[i] },
        ]),
      );
      expect(Array.from(toI32(byName.SEEN.raw))).toEqual([2, 6, -1, 2, 6, -1]);
      expect(byName.OUT.shape).toEqual([2, 6]);
      expect(Array.from(toF32(byName.OUT.raw))).toEqual(data);
    },
  );

  it('a request in the reshape shape instead of dims is refused with the dims expected', async () => {
    const { status, json } = await httpJson(eng.httpPort, 'POST', '/v2/models/reshape_scalar/infer', {
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [2], data: [1, 2] }],
    });
    expect(status).toBe(400);
    expect(json.error).toContain("unexpected shape for input 'INPUT0' for model 'reshape_scalar'. Expected [-1,1], got [2]");
  });

  it('inside an ensemble: each step reshapes on its way in and out', async () => {
    const r = await client.call('ModelInfer', {
      model_name: 'reshape_ensemble',
      inputs: [{ name: 'X', datatype: 'FP32', shape: [2, 1] }],
      raw_input_contents: [f32Bytes([1, -3])],
    });
    expect(r.outputs[0].shape.map(Number)).toEqual([2, 1]);
    expect(Array.from(toF32(r.raw_output_contents[0]))).toEqual([4, -12]);
  });

  it("an ensemble's own reshape: [batch, 2, 3] in, its step sees [batch, 6], [batch, 2, 3] out", async () => {
    const data = Array.from({ length: 12 }, (_, i) => i + 0.25);
    const r = await client.call('ModelInfer', {
      model_name: 'reshape_own_ensemble',
      inputs: [{ name: 'X', datatype: 'FP32', shape: [2, 2, 3] }],
      raw_input_contents: [f32Bytes(data)],
    });
    expect(r.outputs[0].shape.map(Number)).toEqual([2, 2, 3]);
    expect(Array.from(toF32(r.raw_output_contents[0]))).toEqual(data);
  });
});
