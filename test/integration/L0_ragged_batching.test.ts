// Triton's ragged batching (its L0_ragged_batching / L0_batch_input) on ONNX
// Runtime: an `allow_ragged_batch` input is fed as one 1-D tensor of every
// request's elements, `batch_input` tensors say where each request's elements
// end, and requests of different lengths batch together. The model sums each
// request's elements from those tensors, so a wrong concatenation or count
// shows in the answer. Real engine, real ONNX Runtime, gRPC over loopback.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { ElemType, GraphBuilder } from '../../model_repository/onnx-builder.ts';
import { writeModel } from '../fixtures/test-models.ts';
import { f32Bytes, httpJson, protoLoaderClient, removeDir, startTestEngine, tempRepo, toF32, type ProtoClient } from './helpers.ts';

/** SUM[i] = sum of INPUT[END[i]-COUNT[i] .. END[i]) as [B, 1]; INPUT, END and COUNT are 1-D. */
function buildSegmentSum(inputDims: Array<string | number> = ['n']): Uint8Array {
  const g = new GraphBuilder('segment_sum', 1);
  g.input('INPUT', ElemType.FLOAT, inputDims);
  g.input('END', ElemType.FLOAT, ['b']);
  g.input('COUNT', ElemType.FLOAT, ['b']);
  const cs = g.node('CumSum', ['INPUT', g.initializer('axis0', [], BigInt64Array.from([0n]))]);
  const cs0 = g.node('Concat', [g.constFloat('zero', [1], [0]), cs], { axis: 0 });
  const end = g.node('Cast', ['END'], { to: 7 });
  const start = g.node('Sub', [end, g.node('Cast', ['COUNT'], { to: 7 })]);
  const diff = g.node('Sub', [g.node('Gather', [cs0, end], { axis: 0 }), g.node('Gather', [cs0, start], { axis: 0 })]);
  g.node('Unsqueeze', [diff, g.constInt64('axes', [1])], {}, 'SUM');
  g.output('SUM', ElemType.FLOAT, ['b', 1]);
  return g.build();
}

/** OUT = 2 * INPUT, both 1-D: the whole ragged batch doubled, scattered back by batch_output. */
function buildDouble(): Uint8Array {
  const g = new GraphBuilder('double', 1);
  g.input('INPUT', ElemType.FLOAT, ['n']);
  g.node('Mul', ['INPUT', g.constFloat('two', [1], [2])], {}, 'OUT');
  g.output('OUT', ElemType.FLOAT, ['n']);
  return g.build();
}

const SCATTER_CONFIG = `name: "ragged_double"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT", data_type: TYPE_FP32, dims: [ -1 ], allow_ragged_batch: true } ]
output [ { name: "OUT", data_type: TYPE_FP32, dims: [ -1 ] } ]
batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE, target_name: "OUT", source_input: "INPUT" } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
dynamic_batching { max_queue_delay_microseconds: 300000 }
`;

const config = (name: string) => `name: "${name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT", data_type: TYPE_FP32, dims: [ -1 ], allow_ragged_batch: true } ]
batch_input [
  { kind: BATCH_ACCUMULATED_ELEMENT_COUNT, target_name: "END", data_type: TYPE_FP32, source_input: "INPUT" },
  { kind: BATCH_ELEMENT_COUNT, target_name: "COUNT", data_type: TYPE_FP32, source_input: "INPUT" }
]
output [ { name: "SUM", data_type: TYPE_FP32, dims: [ 1 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
dynamic_batching { max_queue_delay_microseconds: 300000 }
`;

let repo: string;
let eng: RunningEngine;
let client: ProtoClient;

beforeAll(async () => {
  repo = tempRepo('l0-ragged');
  writeModel(repo, 'ragged_sum', config('ragged_sum'), { 'model.onnx': buildSegmentSum() });
  writeModel(repo, 'ragged_double', SCATTER_CONFIG, { 'model.onnx': buildDouble() });
  writeModel(repo, 'ragged_not_flat', config('ragged_not_flat'), { 'model.onnx': buildSegmentSum(['b', 'n']) });
  eng = await startTestEngine({ modelRepository: repo });
  client = protoLoaderClient(eng.grpcPort);
});
afterAll(async () => {
  client?.close();
  await eng?.stop();
  removeDir(repo);
});

const sumOf = async (values: number[]) => {
  const r = await client.call('ModelInfer', {
    model_name: 'ragged_sum',
    inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, values.length] }],
    raw_input_contents: [f32Bytes(values)],
  });
  return { shape: r.outputs[0].shape.map(Number), sum: Array.from(toF32(r.raw_output_contents[0])) };
};

describe('L0_ragged_batching', () => {
  it('a model with a ragged 1-D input and batch inputs loads', async () => {
    const { json } = await httpJson(eng.httpPort, 'GET', '/v2/models/ragged_sum/ready');
    expect(json).toEqual({});
    const meta = await httpJson(eng.httpPort, 'GET', '/v2/models/ragged_sum');
    // Clients see the config's inputs only: the batch inputs are the server's.
    expect(meta.json.inputs).toEqual([{ name: 'INPUT', datatype: 'FP32', shape: [-1, -1] }]);
  });

  it('one request alone: its elements, flattened, with its own count', async () => {
    expect(await sumOf([1, 2, 3.5])).toEqual({ shape: [1, 1], sum: [6.5] });
  });

  it('requests of lengths 3, 4 and 5 batch into one execution and each gets its own sum', async () => {
    const before = await httpJson(eng.httpPort, 'GET', '/v2/models/ragged_sum/stats');
    const execBefore = Number(before.json.model_stats[0].execution_count);
    const lists = [
      [1, 2, 3],
      [10, 20, 30, 40],
      [0.5, 0.5, 0.5, 0.5, 1],
    ];
    const answers = await Promise.all(lists.map(sumOf));
    expect(answers).toEqual([
      { shape: [1, 1], sum: [6] },
      { shape: [1, 1], sum: [100] },
      { shape: [1, 1], sum: [3] },
    ]);
    const after = await httpJson(eng.httpPort, 'GET', '/v2/models/ragged_sum/stats');
    const stats = after.json.model_stats[0];
    expect(Number(stats.execution_count) - execBefore).toBeLessThan(3);
    expect(Number(stats.inference_count)).toBeGreaterThanOrEqual(4);
  });

  it("batch_output BATCH_SCATTER_WITH_INPUT_SHAPE: one execution's output goes back to each request in its input's shape", async () => {
    const double = async (values: number[]) => {
      const r = await client.call('ModelInfer', {
        model_name: 'ragged_double',
        inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, values.length] }],
        raw_input_contents: [f32Bytes(values)],
      });
      return { shape: r.outputs[0].shape.map(Number), out: Array.from(toF32(r.raw_output_contents[0])) };
    };
    expect(await double([1, 2])).toEqual({ shape: [1, 2], out: [2, 4] });
    const lists = [
      [1, 2, 3],
      [10, 20, 30, 40],
      [0.5, 1.5, 2.5, 3.5, 4.5],
    ];
    const answers = await Promise.all(lists.map(double));
    expect(answers).toEqual(lists.map((l) => ({ shape: [1, l.length], out: l.map((v) => 2 * v) })));
    const stats = (await httpJson(eng.httpPort, 'GET', '/v2/models/ragged_double/stats')).json.model_stats[0];
    // 4 requests, at most 3 executions: the three concurrent ones shared at least one.
    expect(Number(stats.inference_count)).toBe(4);
    expect(Number(stats.execution_count)).toBeLessThan(4);
  });

  it('a ragged input that is not 1-D in the model file is UNAVAILABLE, saying so', async () => {
    const { json } = await httpJson(eng.httpPort, 'POST', '/v2/repository/index', {});
    const entry = json.find((m: { name: string }) => m.name === 'ragged_not_flat');
    expect(entry.state).toBe('UNAVAILABLE');
    expect(entry.reason).toContain("input[0].allow_ragged_batch: 'INPUT' must be 1-D in the model file to take ragged batches");
  });
});
