// Ragged batching for per-request backends (engine/backends/ragged-requests.ts):
// the batch inputs every request gets, and a batch_output returned once for
// the whole batch scattered back by the source input's shapes.
import { describe, expect, it } from 'vitest';
import { parseModelConfigText } from '../../engine/config/model-config-parser.ts';
import { normalizeModelConfig } from '../../engine/config/model-config-utils.ts';
import { batchOutputTargets, requestBatchInputs, scatterRequestOutputs } from '../../engine/backends/ragged-requests.ts';
import type { InferRequest, InferResponse, Tensor } from '../../engine/api/infer-request.ts';
import { StatusError } from '../../engine/api/status.ts';

const FILE = 'r/config.pbtxt';
const config = (extra: string, mbs = 8) =>
  normalizeModelConfig(
    parseModelConfigText(
      `backend: "js" max_batch_size: ${mbs}
       input [ { name: "IN", data_type: TYPE_FP32, dims: [ -1 ], allow_ragged_batch: true } ]
       output [ { name: "OUT", data_type: TYPE_FP32, dims: [ -1 ] }, { name: "SIDE", data_type: TYPE_FP32, dims: [ 1 ] } ]
       ${extra}`,
      FILE,
    ),
    { modelName: 'r', file: FILE, strict: true },
  );
const SCATTER = 'batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE, target_name: "OUT", source_input: "IN" } ]';
const req = (n: number, outputs: string[] = []): InferRequest => ({
  modelName: 'r',
  parameters: {},
  outputs: outputs.map((name) => ({ name })),
  inputs: [{ name: 'IN', datatype: 'FP32', shape: [1, n], data: new Uint8Array(n * 4) }],
});
const f32 = (name: string, shape: number[], v: number[]): Tensor => ({
  name,
  datatype: 'FP32',
  shape,
  data: new Uint8Array(Float32Array.from(v).buffer),
});
const res = (...outputs: Tensor[]): InferResponse => ({ modelName: 'r', modelVersion: '1', outputs });
const values = (t: Tensor | undefined) => (t ? Array.from(new Float32Array(Uint8Array.from(t.data).buffer)) : undefined);

describe('ragged-requests', () => {
  it('every request gets the same batch inputs, built over the whole batch', () => {
    const c = config(
      'batch_input [ { kind: BATCH_ACCUMULATED_ELEMENT_COUNT, target_name: "END", data_type: TYPE_INT32, source_input: "IN" } ]',
    );
    const [t] = requestBatchInputs(c, [req(2), req(3)]);
    expect(t!.shape).toEqual([2]);
    expect(Array.from(new Int32Array(Uint8Array.from(t!.data).buffer))).toEqual([2, 5]);
  });

  it('no batch inputs without batch_input, or for a model that does not batch', () => {
    expect(requestBatchInputs(config(''), [req(2)])).toEqual([]);
    expect(batchOutputTargets(config(''))).toEqual(new Set());
    expect(batchOutputTargets(config(SCATTER))).toEqual(new Set(['OUT']));
  });

  it("the first response carrying the target is the batch's; each request gets its share, others' copies replaced", () => {
    const c = config(SCATTER);
    const out = scatterRequestOutputs(
      c,
      [req(2), req(1), req(3)],
      [res(f32('OUT', [6], [1, 2, 3, 4, 5, 6]), f32('SIDE', [1, 1], [9])), res(f32('SIDE', [1, 1], [8])), res(f32('OUT', [1], [99]))],
    ) as InferResponse[];
    expect(out.map((r) => r.outputs.find((t) => t.name === 'OUT')?.shape)).toEqual([
      [1, 2],
      [1, 1],
      [1, 3],
    ]);
    expect(out.map((r) => values(r.outputs.find((t) => t.name === 'OUT')))).toEqual([[1, 2], [3], [4, 5, 6]]);
    expect(values(out[1]!.outputs.find((t) => t.name === 'SIDE'))).toEqual([8]);
  });

  it('a request that did not ask for the target gets none; an errored request keeps its error', () => {
    const c = config(SCATTER);
    const err = new StatusError('INTERNAL', 'boom');
    const out = scatterRequestOutputs(c, [req(1, ['SIDE']), req(1), req(2)], [res(f32('OUT', [4], [1, 2, 3, 4])), err, res()]);
    expect((out[0] as InferResponse).outputs).toEqual([]);
    expect(out[1]).toBe(err);
    expect(values((out[2] as InferResponse).outputs[0])).toEqual([3, 4]);
  });

  it('a batch output too small for the batch fails every request, naming the output', () => {
    const out = scatterRequestOutputs(config(SCATTER), [req(2), req(2)], [res(f32('OUT', [3], [1, 2, 3])), res()]);
    for (const o of out) {
      expect(o).toBeInstanceOf(StatusError);
      expect((o as StatusError).message).toContain("batch output 'OUT' of model 'r' has 3 elements, too few");
    }
  });
});
