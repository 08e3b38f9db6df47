// The check of a response's outputs against the model config (Triton's texts),
// one case per rule; test/unit/fuzz.test.ts throws random ones at it.
import { describe, expect, it } from 'vitest';
import { checkOutputs, countBytesElements, outputRules, requestBatch } from '../../engine/api/output-check.ts';
import type { ModelConfig } from '../../engine/api/model-config.ts';
import { serializeBytes } from '../../engine/api/datatypes.ts';

const cfg = (over: Partial<ModelConfig> = {}) =>
  ({
    name: 'm',
    max_batch_size: 0,
    input: [{ name: 'x', data_type: 'TYPE_FP32', dims: [-1] }],
    output: [
      { name: 'y', data_type: 'TYPE_FP32', dims: [2, -1] },
      { name: 's', data_type: 'TYPE_STRING', dims: [-1] },
    ],
    ...over,
  }) as unknown as ModelConfig;
const f32 = (shape: number[], n = shape.reduce((a, d) => a * d, 1)) => ({
  name: 'y',
  datatype: 'FP32' as const,
  shape,
  data: new Uint8Array(n * 4),
});
const msg = (r: ReturnType<typeof checkOutputs>) => r?.message;

describe('checkOutputs', () => {
  it('accepts outputs that fit, in any order, with -1 dims of any size', () => {
    const s = {
      name: 's',
      datatype: 'BYTES' as const,
      shape: [2],
      data: new Uint8Array(serializeBytes([Buffer.from('a'), Buffer.from('bc')])),
    };
    expect(checkOutputs(cfg(), [s, f32([2, 3])], ['y', 's'], undefined)).toBeUndefined();
  });

  it('names the output and the model for each misfit', () => {
    expect(msg(checkOutputs(cfg(), [{ ...f32([2, 1]), name: 'q' }], [], undefined))).toBe("unexpected inference output 'q' for model 'm'");
    expect(msg(checkOutputs(cfg(), [f32([2, 1]), f32([2, 1])], [], undefined))).toBe(
      "output 'y' appears twice in the response of model 'm'",
    );
    expect(msg(checkOutputs(cfg(), [{ ...f32([2, 1]), datatype: 'INT32' }], [], undefined))).toBe(
      "unexpected datatype TYPE_INT32 for inference output 'y', expecting TYPE_FP32 for model 'm'",
    );
    expect(msg(checkOutputs(cfg(), [f32([3, 1])], [], undefined))).toBe(
      "unexpected shape for output 'y', model configuration shape is [2,-1], inference shape is [3,1] for model 'm'",
    );
    expect(msg(checkOutputs(cfg(), [f32([2, 2], 3)], [], undefined))).toBe(
      "output byte size mismatch for output 'y' for model 'm'. Expected 16, got 12",
    );
    expect(msg(checkOutputs(cfg(), [{ name: 's', datatype: 'BYTES', shape: [2], data: new Uint8Array([1, 0, 0]) }], [], undefined))).toBe(
      "expected 2 string elements for inference output 's' for model 'm', got a malformed buffer",
    );
    expect(msg(checkOutputs(cfg(), [f32([2, 1])], ['y', 's'], undefined))).toBe(
      "output 's' of model 'm' is missing from the response (it was requested)",
    );
  });

  it("checks the batch dimension against the request's batch size when the model batches", () => {
    const c = cfg({ max_batch_size: 4 });
    expect(checkOutputs(c, [f32([3, 2, 1])], [], 3)).toBeUndefined();
    expect(msg(checkOutputs(c, [f32([2, 2, 1])], [], 3))).toBe(
      "unexpected shape for output 'y', model configuration shape is [-1,2,-1], inference shape is [2,2,1] for model 'm' (the request's batch size is 3)",
    );
    expect(requestBatch(c, { inputs: [{ name: 'x', datatype: 'FP32', shape: [3, 5], data: new Uint8Array() }] })).toBe(3);
    expect(requestBatch(cfg(), { inputs: [{ name: 'x', datatype: 'FP32', shape: [3, 5], data: new Uint8Array() }] })).toBeUndefined();
  });

  it("accepts a reshaped output in the model's shape or the config's; skips the bytes of an output in a client's region", () => {
    const c = cfg({ output: [{ name: 'y', data_type: 'TYPE_FP32', dims: [4], reshape: { shape: [2, 2] } }] });
    expect(checkOutputs(c, [f32([4])], [], undefined)).toBeUndefined();
    expect(checkOutputs(c, [f32([2, 2])], [], undefined)).toBeUndefined();
    expect(checkOutputs(cfg(), [{ ...f32([2, 8], 0), shm: { region: 'r', offset: 0, byteSize: 64 } }], [], undefined)).toBeUndefined();
  });

  it('counts BYTES elements without copying, -1 when the framing is cut', () => {
    expect(countBytesElements(new Uint8Array(serializeBytes([Buffer.from('x'), Buffer.alloc(0), Buffer.from('yz')])))).toBe(3);
    expect(countBytesElements(new Uint8Array(0))).toBe(0);
    expect(countBytesElements(new Uint8Array([5, 0, 0, 0, 1]))).toBe(-1);
    expect(countBytesElements(new Uint8Array([0, 0]))).toBe(-1);
  });
});

describe('outputRules: per backend, as strict as Triton and no stricter', () => {
  const misfits = [
    { ...f32([3, 1]), datatype: 'INT32' as const, data: new Uint8Array(12) }, // another datatype and shape
  ];

  it.each([
    ['python', { backend: 'python' }],
    ['js', { backend: 'js' }],
    ['onnxruntime by backend', { backend: 'onnxruntime' }],
    ['onnxruntime by platform', { platform: 'onnxruntime_onnx' }],
    ['ensemble', { platform: 'ensemble' }],
  ])('%s: outputs as made (datatype, shape, batch size), a wanted output may be absent', (_, over) => {
    const c = cfg({ ...over, max_batch_size: 4 } as Partial<ModelConfig>);
    expect(outputRules(c)).toEqual({ datatype: false, shape: false, wanted: false });
    expect(checkOutputs(c, misfits, ['y', 's'], 1)).toBeUndefined();
  });

  it.each([
    ['python', 'python'],
    ['js', 'js'],
    ['onnxruntime', 'onnxruntime'],
  ])('%s: an undeclared name, a malformed shape or bytes that do not fill the shape are still refused', (_, backend) => {
    const c = cfg({ backend } as Partial<ModelConfig>);
    expect(msg(checkOutputs(c, [{ ...f32([1]), name: 'q' }], [], undefined))).toBe("unexpected inference output 'q' for model 'm'");
    expect(msg(checkOutputs(c, [{ ...f32([1]), shape: [-1] }], [], undefined))).toBe("output 'y' of model 'm' has a malformed shape [-1]");
    expect(msg(checkOutputs(c, [{ ...f32([2, 2], 3), datatype: 'INT32' }], [], undefined))).toBe(
      "output byte size mismatch for output 'y' for model 'm'. Expected 16, got 12",
    );
    expect(msg(checkOutputs(c, [{ ...f32([1]), datatype: 'FP8' as never }], [], undefined))).toBe(
      "output 'y' of model 'm' has an unknown datatype 'FP8'",
    );
  });

  it('a backend of no known kind gets every check', () => {
    expect(outputRules(cfg({ backend: 'custom' } as Partial<ModelConfig>))).toEqual({ datatype: true, shape: true, wanted: true });
    expect(outputRules(cfg())).toEqual({ datatype: true, shape: true, wanted: true });
  });
});
