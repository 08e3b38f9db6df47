import { describe, expect, it } from 'vitest';
import { parseModelConfigText } from '../../engine/config/model-config-parser.ts';
import { normalizeModelConfig } from '../../engine/config/model-config-utils.ts';
import { batchDims, batchInputTensors, raggedInputs } from '../../engine/backends/onnxruntime/ragged-batch.ts';
import type { InferRequest } from '../../engine/api/infer-request.ts';

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
  modelName: 'r', parameters: {}, outputs: [],
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
  return { shape: t!.shape, datatype: t!.datatype, values: Array.from(t!.datatype === 'FP32' ? new Float32Array(copy) : new Int32Array(copy)) };
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
    expect(err(bi('BATCH_ELEMENT_COUNT', 'TYPE_INT64'))).toBe(`${FILE}: batch_input[0].data_type: batch input 'X' must be TYPE_FP32 or TYPE_INT32, got TYPE_INT64`);
    expect(err('batch_input [ { kind: BATCH_ELEMENT_COUNT, target_name: "X", data_type: TYPE_FP32, source_input: "NOPE" } ]')).toBe(
      `${FILE}: batch_input[0].source_input: 'NOPE' is not an input of the model`,
    );
    expect(err('batch_input [ { kind: BATCH_ELEMENT_COUNT, target_name: "B", data_type: TYPE_FP32, source_input: "IN" } ]')).toMatch(
      /batch_input\[0\]\.target_name: 'B' is also a request input/,
    );
  });
});
