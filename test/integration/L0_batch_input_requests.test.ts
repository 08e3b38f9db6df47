// Ragged batching and batch_input / batch_output for the backends that hand a
// model its batch as separate requests (js and python), after Triton's
// L0_batch_input (batch_input_test.py): four requests of lengths 2, 4, 1 and
// 3 run as one batch; every request carries the batch's batch_input tensors,
// and the models (written for this suite) echo them, so each answer shows the
// whole batch's counts exactly as Triton's identity models do. A
// batch_output the model returns once for the whole batch is scattered back
// to each request in its input's shape (Triton's ragged_io). Real engine,
// real stub processes, HTTP JSON.
import { describe, expect, it } from 'vitest';
import { httpJson } from './helpers.ts';
import { pythonEngine, pythonRepo } from './python-support.ts';
import type { RunningEngine } from '../../engine/server/server.ts';
import { writeModel } from '../fixtures/test-models.ts';

// Outputs: RAGGED_OUTPUT the batch's elements concatenated; OUTPUT0 the same,
// returned with the first request only (a batch_output); X_OUTPUT echoes
// batch input X_INPUT as [1, ...shape], or this request's rows of a
// BATCH_ITEM_SHAPE input (rank 2), as Triton splits a batched output.
const JS_MODEL = `let outputs = [];
export function initialize(ctx) { outputs = ctx.config.output.map((o) => o.name); }
const f32 = (t) => Array.from(new Float32Array(t.data.buffer.slice(t.data.byteOffset, t.data.byteOffset + t.data.byteLength)));
const fp32 = (shape, v) => ({ datatype: 'FP32', shape, data: Float32Array.from(v) });
export async function execute(requests) {
  const src = requests[0].inputs.INPUT0 ? 'INPUT0' : 'RAGGED_INPUT';
  const all = requests.flatMap((r) => f32(r.inputs[src]));
  let row = 0;
  return requests.map((r, i) => {
    const out = {};
    const rows = r.inputs[src].shape[0];
    for (const name of outputs) {
      if (name === 'OUTPUT0') { if (i === 0) out[name] = fp32([all.length], all); continue; }
      if (name === 'RAGGED_OUTPUT') { out[name] = fp32([1, all.length], all); continue; }
      const b = r.inputs[name.replace('_OUTPUT', '_INPUT')];
      const v = f32(b);
      if (b.shape.length === 2) out[name] = fp32([rows, b.shape[1]], v.slice(row * b.shape[1], (row + rows) * b.shape[1]));
      else out[name] = fp32([1, ...b.shape], v);
    }
    row += rows;
    return { outputs: out };
  });
}
`;

const PY_MODEL = `import json
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.outputs = [o["name"] for o in json.loads(args["model_config"])["output"]]

    def execute(self, requests):
        src = "INPUT0" if pb_utils.get_input_tensor_by_name(requests[0], "INPUT0") is not None else "RAGGED_INPUT"
        ins = [pb_utils.get_input_tensor_by_name(r, src).as_numpy() for r in requests]
        whole = np.concatenate([x.reshape(-1) for x in ins]).astype(np.float32)
        row = 0
        responses = []
        for i, r in enumerate(requests):
            rows = ins[i].shape[0]
            out = []
            for name in self.outputs:
                if name == "OUTPUT0":
                    if i == 0:
                        out.append(pb_utils.Tensor(name, whole))
                    continue
                if name == "RAGGED_OUTPUT":
                    out.append(pb_utils.Tensor(name, whole.reshape(1, -1)))
                    continue
                b = pb_utils.get_input_tensor_by_name(r, name.replace("_OUTPUT", "_INPUT")).as_numpy()
                if b.ndim == 2:
                    out.append(pb_utils.Tensor(name, b[row:row + rows]))
                else:
                    out.append(pb_utils.Tensor(name, b.reshape(1, *b.shape)))
            row += rows
            responses.append(pb_utils.InferenceResponse(out))
        return responses
`;

const bi = (kind: string, target: string) =>
  `{ kind: ${kind}, target_name: "${target}", data_type: TYPE_FP32, source_input: "RAGGED_INPUT" }`;
const out = (name: string) => `{ name: "${name}", data_type: TYPE_FP32, dims: [ -1 ] }`;

/** Triton's L0_batch_input models, as configs for backend `b`. */
const MODELS: Record<string, { dims: string; inputs: string[]; outputs: string[]; extra?: string }> = {
  ragged_element_count_acc_zero: {
    dims: '-1',
    inputs: [bi('BATCH_ELEMENT_COUNT', 'BATCH_AND_SIZE_INPUT'), bi('BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO', 'BATCH_INPUT')],
    outputs: [out('BATCH_AND_SIZE_OUTPUT'), out('BATCH_OUTPUT')],
  },
  ragged_acc_shape: {
    dims: '-1',
    inputs: [bi('BATCH_ACCUMULATED_ELEMENT_COUNT', 'BATCH_AND_SIZE_INPUT'), bi('BATCH_MAX_ELEMENT_COUNT_AS_SHAPE', 'BATCH_INPUT')],
    outputs: [out('RAGGED_OUTPUT'), out('BATCH_AND_SIZE_OUTPUT'), out('BATCH_OUTPUT')],
  },
  batch_item_flatten: { dims: '-1, -1', inputs: [bi('BATCH_ITEM_SHAPE_FLATTEN', 'BATCH_INPUT')], outputs: [out('BATCH_OUTPUT')] },
  batch_item: {
    dims: '-1, -1',
    inputs: [bi('BATCH_ITEM_SHAPE', 'BATCH_INPUT')],
    outputs: ['{ name: "BATCH_OUTPUT", data_type: TYPE_FP32, dims: [ 2 ] }'],
  },
};

const config = (name: string, backend: string, m: (typeof MODELS)[string]) => `name: "${name}"
backend: "${backend}"
max_batch_size: 8
input [ { name: "RAGGED_INPUT", data_type: TYPE_FP32, dims: [ ${m.dims} ], allow_ragged_batch: true } ]
batch_input [ ${m.inputs.join(', ')} ]
output [ ${m.outputs.join(', ')} ]
dynamic_batching { preferred_batch_size: [ 4 ], max_queue_delay_microseconds: 20000000 }
`;

const RAGGED_IO = (name: string, backend: string) => `name: "${name}"
backend: "${backend}"
max_batch_size: 8
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ -1 ], allow_ragged_batch: true } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE, target_name: "OUTPUT0", source_input: "INPUT0" } ]
dynamic_batching { preferred_batch_size: [ 4 ], max_queue_delay_microseconds: 20000000 }
`;

const BACKENDS = ['js', 'python'] as const;

let eng: RunningEngine;
pythonEngine(
  () => {
    const extra: Record<string, { config: string; model: string }> = {};
    for (const [m, spec] of Object.entries(MODELS))
      extra[`${m}_python`] = { config: config(`${m}_python`, 'python', spec), model: PY_MODEL };
    extra.ragged_io_python = { config: RAGGED_IO('ragged_io_python', 'python'), model: PY_MODEL };
    const repo = pythonRepo('l0-batch-input-req', [], extra);
    for (const [m, spec] of Object.entries(MODELS)) writeModel(repo, `${m}_js`, config(`${m}_js`, 'js', spec), { 'model.js': JS_MODEL });
    writeModel(repo, 'ragged_io_js', RAGGED_IO('ragged_io_js', 'js'), { 'model.js': JS_MODEL });
    return repo;
  },
  (s) => {
    eng = s.eng;
  },
);

type Answer = { status: number; outputs: Record<string, { shape: number[]; data: number[] }> };

/** Infer one request per shape, concurrently (each filled with its length, as Triton's test fills them); asks for `output`. */
async function batch(model: string, shapes: number[][], input = 'RAGGED_INPUT', output = 'BATCH_OUTPUT'): Promise<Answer[]> {
  const one = async (shape: number[]): Promise<Answer> => {
    const n = shape.reduce((a, b) => a * b, 1);
    const fill = shape.length === 2 ? shape[1]! : shape[0]!;
    const body = { inputs: [{ name: input, datatype: 'FP32', shape, data: new Array<number>(n).fill(fill) }], outputs: [{ name: output }] };
    const { status, json } = await httpJson(eng.httpPort, 'POST', `/v2/models/${model}/infer`, body);
    const outputs = Object.fromEntries(
      (json.outputs ?? []).map((o: { name: string; shape: number[]; data: number[] }) => [o.name, { shape: o.shape, data: o.data }]),
    );
    return { status, outputs };
  };
  return Promise.all(shapes.map(one));
}
const LENGTHS = [
  [1, 2],
  [1, 4],
  [1, 1],
  [1, 3],
];
const executions = async (model: string) =>
  Number((await httpJson(eng.httpPort, 'GET', `/v2/models/${model}/stats`)).json.model_stats[0].execution_count);

describe.each(BACKENDS)('L0_batch_input on %s models (per-request backends)', (b) => {
  it('test_element_count: every request gets BATCH_ELEMENT_COUNT of the whole batch, [[2, 4, 1, 3]], in one execution', async () => {
    const answers = await batch(`ragged_element_count_acc_zero_${b}`, LENGTHS, 'RAGGED_INPUT', 'BATCH_AND_SIZE_OUTPUT');
    for (const a of answers) expect(a).toEqual({ status: 200, outputs: { BATCH_AND_SIZE_OUTPUT: { shape: [1, 4], data: [2, 4, 1, 3] } } });
    expect(await executions(`ragged_element_count_acc_zero_${b}`)).toBe(1);
  });

  it('test_accumulated_element_count_with_zero: [[0, 2, 6, 7, 10]]', async () => {
    const answers = await batch(`ragged_element_count_acc_zero_${b}`, LENGTHS);
    for (const a of answers) expect(a.outputs.BATCH_OUTPUT).toEqual({ shape: [1, 5], data: [0, 2, 6, 7, 10] });
  });

  it('test_accumulated_element_count: [[2, 6, 7, 10]]', async () => {
    const answers = await batch(`ragged_acc_shape_${b}`, LENGTHS, 'RAGGED_INPUT', 'BATCH_AND_SIZE_OUTPUT');
    for (const a of answers) expect(a.outputs.BATCH_AND_SIZE_OUTPUT).toEqual({ shape: [1, 4], data: [2, 6, 7, 10] });
  });

  it('test_max_element_count_as_shape: the batch input has shape [4] (the longest request)', async () => {
    const answers = await batch(`ragged_acc_shape_${b}`, LENGTHS);
    for (const a of answers) expect(a.outputs.BATCH_OUTPUT!.shape).toEqual([1, 4]);
  });

  it('test_ragged_input: the requests of different lengths are one batch, their elements in order', async () => {
    const answers = await batch(`ragged_acc_shape_${b}`, LENGTHS, 'RAGGED_INPUT', 'RAGGED_OUTPUT');
    const whole = [2, 2, 4, 4, 4, 4, 1, 3, 3, 3];
    for (const a of answers) expect(a.outputs.RAGGED_OUTPUT).toEqual({ shape: [1, 10], data: whole });
  });

  it('test_batch_item_shape_flatten: [[4, 1, 1, 2, 1, 2, 2, 2]]', async () => {
    const answers = await batch(`batch_item_flatten_${b}`, [
      [1, 4, 1],
      [1, 1, 2],
      [1, 1, 2],
      [1, 2, 2],
    ]);
    for (const a of answers) expect(a.outputs.BATCH_OUTPUT).toEqual({ shape: [1, 8], data: [4, 1, 1, 2, 1, 2, 2, 2] });
  });

  it("test_batch_item_shape: each request gets its items' shapes (a request of batch 2 two rows)", async () => {
    // Batch sizes 2 + 1 + 1: the preferred batch of 4.
    const answers = await batch(`batch_item_${b}`, [
      [2, 1, 2],
      [1, 1, 2],
      [1, 2, 2],
    ]);
    expect(answers.map((a) => a.outputs.BATCH_OUTPUT)).toEqual([
      { shape: [2, 2], data: [1, 2, 1, 2] },
      { shape: [1, 2], data: [1, 2] },
      { shape: [1, 2], data: [2, 2] },
    ]);
  });

  it('test_ragged_output: a batch_output returned once is scattered, each request gets [[v] * v]', async () => {
    const before = await executions(`ragged_io_${b}`);
    const answers = await batch(`ragged_io_${b}`, LENGTHS, 'INPUT0', 'OUTPUT0');
    expect(answers.map((a) => a.outputs.OUTPUT0)).toEqual([2, 4, 1, 3].map((v) => ({ shape: [1, v], data: new Array<number>(v).fill(v) })));
    expect((await executions(`ragged_io_${b}`)) - before).toBe(1);
  });
});
