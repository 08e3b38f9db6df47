// The check of a request against its model's config (Triton's texts), one
// case per rule, and the per-config lookups it reads (built once per config,
// rebuilt when the config's tensor lists are replaced).
import { describe, expect, it } from 'vitest';
import { validateRequest } from '../../engine/server/infer-validation.ts';
import { lookupsOf } from '../../engine/api/config-lookups.ts';
import type { ModelConfig } from '../../engine/api/model-config.ts';
import type { InferInput, InferRequest } from '../../engine/api/infer-request.ts';

const cfg = (over: Partial<ModelConfig> = {}) =>
  ({
    name: 'm',
    max_batch_size: 4,
    input: [
      { name: 'a', data_type: 'TYPE_FP32', dims: [2] },
      { name: 'b', data_type: 'TYPE_INT32', dims: [-1] },
      { name: 'c', data_type: 'TYPE_FP32', dims: [1], optional: true },
    ],
    output: [{ name: 'y', data_type: 'TYPE_FP32', dims: [2] }],
    ...over,
  }) as unknown as ModelConfig;
const f32 = (name: string, shape: number[]): InferInput => ({
  name,
  datatype: 'FP32',
  shape,
  data: new Uint8Array(shape.reduce((n, d) => n * d, 1) * 4),
});
const i32 = (name: string, shape: number[]): InferInput => ({ ...f32(name, shape), datatype: 'INT32' });
const req = (inputs: InferInput[], outputs: string[] = []): InferRequest => ({
  modelName: 'm',
  inputs,
  outputs: outputs.map((name) => ({ name })),
  parameters: {},
});
const problem = (c: ModelConfig, r: InferRequest) => {
  try {
    validateRequest(c, r);
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
};

describe('validateRequest', () => {
  it('accepts a request that fits, the optional input left out, any size on a -1 dim', () => {
    expect(problem(cfg(), req([f32('a', [3, 2]), i32('b', [3, 7])], ['y']))).toBeUndefined();
    expect(problem(cfg(), req([i32('b', [1, 1]), f32('c', [1, 1]), f32('a', [1, 2])]))).toBeUndefined();
  });

  it('names the input and the model for each misfit', () => {
    const c = cfg();
    expect(problem(c, req([f32('a', [1, 2]), i32('b', [1, 1]), f32('z', [1, 1])]))).toBe("unexpected inference input 'z' for model 'm'");
    expect(problem(c, req([f32('a', [1, 2]), i32('b', [1, 1]), f32('a', [1, 2])]))).toBe("input 'a' given twice for model 'm'");
    expect(problem(c, req([i32('a', [1, 2]), i32('b', [1, 1])]))).toBe(
      "inference input 'a' data-type is 'INT32', but model 'm' expects 'FP32'",
    );
    expect(problem(c, req([f32('a', [1, 3]), i32('b', [1, 1])]))).toBe(
      "unexpected shape for input 'a' for model 'm'. Expected [-1,2], got [1,3]",
    );
    expect(problem(c, req([f32('a', [2]), i32('b', [1, 1])]))).toBe(
      "unexpected shape for input 'a' for model 'm'. Expected [-1,2], got [2]",
    );
    expect(problem(c, req([f32('a', [5, 2]), i32('b', [5, 1])]))).toBe(
      "inference request batch-size must be <= 4 for 'm' (input 'a' has batch 5)",
    );
    expect(problem(c, req([f32('a', [1, 2]), i32('b', [2, 1])]))).toBe(
      "input 'b' batch size 2 does not match the other inputs' 1 for model 'm'",
    );
    expect(problem(c, req([{ ...f32('a', [1, 2]), data: new Uint8Array(4) }, i32('b', [1, 1])]))).toBe(
      "input byte size mismatch for input 'a' for model 'm'. Expected 8, got 4",
    );
    expect(problem(c, req([f32('a', [1, 2]), i32('b', [1, 1])], ['q']))).toBe("unexpected inference output 'q' for model 'm'");
  });

  it('lists what was given and which required inputs are missing', () => {
    expect(problem(cfg(), req([f32('c', [1, 1]), f32('a', [1, 2])]))).toBe(
      "expected 3 inputs but got 2 inputs for model 'm'. Got input(s) ['c', 'a'], but missing required input(s) ['b']",
    );
    expect(problem(cfg(), req([]))).toBe(
      "expected 3 inputs but got 0 inputs for model 'm'. Got input(s) [], but missing required input(s) ['a', 'b']",
    );
  });

  it('checks a model without batching against its dims alone', () => {
    const c = cfg({ max_batch_size: 0 });
    expect(problem(c, req([f32('a', [2]), i32('b', [9])]))).toBeUndefined();
    expect(problem(c, req([f32('a', [1, 2]), i32('b', [9])]))).toBe(
      "unexpected shape for input 'a' for model 'm'. Expected [2], got [1,2]",
    );
  });
});

describe('lookupsOf', () => {
  it('holds full shapes, reshape shapes, required and ragged inputs, output names', () => {
    const c = cfg({
      input: [
        { name: 'a', data_type: 'TYPE_FP32', dims: [2], allow_ragged_batch: true },
        { name: 'c', data_type: 'TYPE_FP32', dims: [1], optional: true },
      ],
      output: [
        { name: 'y', data_type: 'TYPE_FP32', dims: [2], reshape: { shape: [1, 2] } },
        { name: 'z', data_type: 'TYPE_FP32', dims: [3] },
      ],
    });
    const l = lookupsOf(c);
    expect(l.inputShapes.get('a')).toEqual([-1, 2]);
    expect(l.required.map((i) => i.name)).toEqual(['a']);
    expect([...l.ragged]).toEqual(['a']);
    expect(l.outputShapes.get('y')).toEqual([
      [-1, 2],
      [-1, 1, 2],
    ]);
    expect(l.outputNames).toEqual(['y', 'z']);
  });

  it('is built once per config, and again when its tensor lists or batch size are replaced', () => {
    const c = cfg();
    const first = lookupsOf(c);
    expect(lookupsOf(c)).toBe(first);
    c.input = [{ name: 'n', data_type: 'TYPE_FP32', dims: [1] }];
    expect(lookupsOf(c).inputs.has('n')).toBe(true);
    expect(problem(c, req([f32('n', [1, 1])]))).toBeUndefined();
    c.max_batch_size = 0;
    expect(lookupsOf(c).inputShapes.get('n')).toEqual([1]);
    expect(problem(c, req([f32('n', [1, 1])]))).toBe("unexpected shape for input 'n' for model 'm'. Expected [1], got [1,1]");
  });
});
