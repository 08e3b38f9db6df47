import { describe, expect, it } from 'vitest';
import { parseModelConfigText } from '../../engine/config/model-config-parser.ts';
import { normalizeModelConfig } from '../../engine/config/model-config-utils.ts';
import {
  batchDims,
  batchInputTensors,
  batchOutputSources,
  raggedInputs,
  scatterBatchOutput,
} from '../../engine/backends/onnxruntime/ragged-batch.ts';
import type { InferRequest } from '../../engine/api/infer-request.ts';
import { deserializeBytes, serializeBytes } from '../../engine/api/datatypes.ts';

const FILE = 'r/config.pbtxt';
const config = (batchInputs: string, mbs = 8) =>
  normalizeModelConfig(
    parseModelConfigText(
      `backend: "onnxruntime" max_batch_size: ${mbs}
       input [ { name: "IN", data_type: TYPE_FP32, dims: [ -1 ], allow_ragged_batch: true }, { name: "B", data_type: TYPE_FP32, dims: [ 2 ] } ]
       output [ { name: "OUT", data_type: TYPE_FP32, dims: [ 1 ] } ]
       ${batchInputs}`,
      FILE,
    ),
    { modelName: 'r', file: FILE, strict: true },
  );
const req = (n: number, rows = 1): InferRequest => ({
  modelName: 'r',
  parameters: {},
  outputs: [],
  inputs: [
    { name: 'IN', datatype: 'FP32', shape: [rows, n], data: new Uint8Array(rows * n * 4) },
    { name: 'B', datatype: 'FP32', shape: [rows, 2], data: new Uint8Array(rows * 8) },
  ],
});
const bi = (kind: string, type = 'TYPE_INT32') =>
  `batch_input [ { kind: ${kind}, target_name: "X", data_type: ${type}, source_input: "IN" } ]`;
const values = (kind: string, reqs: InferRequest[], type = 'TYPE_INT32') => {
  const [t] = batchInputTensors(config(bi(kind, type)), reqs);
  const copy = Uint8Array.from(t!.data).buffer;
  return {
    shape: t!.shape,
    datatype: t!.datatype,
    values: Array.from(t!.datatype === 'FP32' ? new Float32Array(copy) : new Int32Array(copy)),
  };
};

describe('batch inputs (Triton ragged batching)', () => {
  const reqs = [req(3), req(4), req(5)];
  it('BATCH_ELEMENT_COUNT and the accumulated kinds', () => {
    expect(values('BATCH_ELEMENT_COUNT', reqs)).toEqual({ shape: [3], datatype: 'INT32', values: [3, 4, 5] });
    expect(values('BATCH_ACCUMULATED_ELEMENT_COUNT', reqs, 'TYPE_FP32')).toEqual({ shape: [3], datatype: 'FP32', values: [3, 7, 12] });
    expect(values('BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO', reqs)).toEqual({ shape: [4], datatype: 'INT32', values: [0, 3, 7, 12] });
  });
  it('BATCH_MAX_ELEMENT_COUNT_AS_SHAPE tells by its shape', () => {
    expect(values('BATCH_MAX_ELEMENT_COUNT_AS_SHAPE', reqs).shape).toEqual([5]);
  });
  it('BATCH_ITEM_SHAPE and _FLATTEN give each batch item its shape', () => {
    const two = [req(3, 2), req(6)];
    expect(values('BATCH_ITEM_SHAPE', two)).toEqual({ shape: [3, 1], datatype: 'INT32', values: [3, 3, 6] });
    expect(values('BATCH_ITEM_SHAPE_FLATTEN', two)).toEqual({ shape: [3], datatype: 'INT32', values: [3, 3, 6] });
  });
  it('a ragged input goes 1-D over the whole batch; others concatenate on the batch dim', () => {
    const c = config('');
    const ragged = raggedInputs(c);
    expect([...ragged]).toEqual(['IN']);
    expect(batchDims('IN', reqs, ragged, true)).toEqual([12]);
    expect(batchDims('IN', [req(3)], ragged, false)).toEqual([3]);
    expect(batchDims('B', reqs, ragged, true)).toEqual([3, 2]);
    expect(raggedInputs(config('', 0)).size).toBe(0);
  });
  it('config checks name the batch_input at fault', () => {
    const err = (text: string) => {
      try {
        config(text);
      } catch (e) {
        return (e as Error).message;
      }
      return 'no error';
    };
    expect(err(bi('BATCH_ELEMENT_COUNT', 'TYPE_INT64'))).toBe(
      `${FILE}: batch_input[0].data_type: batch input 'X' must be TYPE_FP32 or TYPE_INT32, got TYPE_INT64`,
    );
    expect(err('batch_input [ { kind: BATCH_ELEMENT_COUNT, target_name: "X", data_type: TYPE_FP32, source_input: "NOPE" } ]')).toBe(
      `${FILE}: batch_input[0].source_input: 'NOPE' is not an input of the model`,
    );
    expect(err('batch_input [ { kind: BATCH_ELEMENT_COUNT, target_name: "B", data_type: TYPE_FP32, source_input: "IN" } ]')).toMatch(
      /batch_input\[0\]\.target_name: 'B' is also a request input/,
    );
  });
});

describe('batch outputs (BATCH_SCATTER_WITH_INPUT_SHAPE)', () => {
  const bo = (dims = '[ -1 ]', type = 'TYPE_FP32') =>
    normalizeModelConfig(
      parseModelConfigText(
        `backend: "onnxruntime" max_batch_size: 8
         input [ { name: "IN", data_type: TYPE_FP32, dims: [ -1 ], allow_ragged_batch: true } ]
         output [ { name: "OUT", data_type: ${type}, dims: ${dims} } ]
         batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE, target_name: "OUT", source_input: "IN" } ]`,
        FILE,
      ),
      { modelName: 'r', file: FILE, strict: true },
    );
  const ins = (...shapes: number[][]): InferRequest[] =>
    shapes.map((shape) => ({
      modelName: 'r',
      parameters: {},
      outputs: [],
      inputs: [{ name: 'IN', datatype: 'FP32', shape, data: new Uint8Array(0) }],
    }));
  const f32 = (u: Uint8Array) => Array.from(new Float32Array(Uint8Array.from(u).buffer));

  it("gives each request its source input's shape and that many elements, in order", () => {
    const cfg = bo();
    expect(batchOutputSources(cfg)).toEqual(new Map([['OUT', 'IN']]));
    const t = { name: 'OUT', datatype: 'FP32' as const, shape: [6], data: new Uint8Array(Float32Array.of(1, 2, 3, 4, 5, 6).buffer) };
    const parts = scatterBatchOutput(cfg, t, 'IN', ins([1, 1], [1, 3], [2, 1]));
    expect(parts.map((p) => p.shape)).toEqual([
      [1, 1],
      [1, 3],
      [2, 1],
    ]);
    expect(parts.map((p) => f32(p.data))).toEqual([[1], [2, 3, 4], [5, 6]]);
  });

  it('keeps fixed dims of the output and scatters BYTES items', () => {
    const fixed = scatterBatchOutput(
      bo('[ -1, 2 ]'),
      { name: 'OUT', datatype: 'FP32', shape: [8], data: new Uint8Array(Float32Array.of(1, 2, 3, 4, 5, 6, 7, 8).buffer) },
      'IN',
      ins([1, 1], [1, 3]),
    );
    expect(fixed.map((p) => [p.shape, f32(p.data)])).toEqual([
      [
        [1, 1, 2],
        [1, 2],
      ],
      [
        [1, 3, 2],
        [3, 4, 5, 6, 7, 8],
      ],
    ]);
    const bytes = scatterBatchOutput(
      bo('[ -1 ]', 'TYPE_STRING'),
      { name: 'OUT', datatype: 'BYTES', shape: [3], data: serializeBytes([Buffer.from('a'), Buffer.from('bb'), Buffer.from('c')]) },
      'IN',
      ins([1, 2], [1, 1]),
    );
    expect(bytes.map((p) => deserializeBytes(p.data, 'OUT').map((b) => Buffer.from(b).toString()))).toEqual([['a', 'bb'], ['c']]);
  });

  it('refuses an output too short for the shapes, and bad configs by name', () => {
    expect(() =>
      scatterBatchOutput(bo(), { name: 'OUT', datatype: 'FP32', shape: [2], data: new Uint8Array(8) }, 'IN', ins([1, 1], [1, 3])),
    ).toThrow("batch output 'OUT' of model 'r' has 2 elements, too few to scatter by the shapes of input 'IN'");
    const err = (text: string) => {
      try {
        config(text);
      } catch (e) {
        return (e as Error).message;
      }
      return 'no error';
    };
    expect(err('batch_output [ { target_name: "NOPE", source_input: "IN" } ]')).toBe(
      `${FILE}: batch_output[0].target_name: 'NOPE' is not an output of the model`,
    );
    expect(err('batch_output [ { target_name: "OUT", source_input: "NOPE" } ]')).toBe(
      `${FILE}: batch_output[0].source_input: 'NOPE' is not an input of the model`,
    );
  });
});
