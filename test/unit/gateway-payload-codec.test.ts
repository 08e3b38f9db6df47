import { describe, expect, it } from 'vitest';
import { GatewayError } from '../../gateway/core/errors.ts';
import type { ResolvedFunction } from '../../gateway/calls/function-registry.ts';
import { implicitDefinition } from '../../gateway/calls/function-registry.ts';
import {
  bytesInput,
  fitShape,
  jsonInputs,
  multipartInputs,
  outputsJson,
  predictOutputBytes,
  rawBodySpec,
} from '../../gateway/calls/payload-codec.ts';
import { decodeValues, deserializeBytes, encodeValues } from '../../gateway/calls/tensor-data.ts';

function fn(inputs: ResolvedFunction['inputs'], outputs: ResolvedFunction['outputs'] = []): ResolvedFunction {
  return { name: 'f', model: 'm', version: '', platform: 'p', implicit: true, definition: implicitDefinition('f'), inputs, outputs };
}
const spec = (name: string, datatype: string, shape: number[]) => ({ name, tensor: name.toUpperCase(), datatype, shape });

function code(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    return `${(e as GatewayError).code}: ${(e as Error).message}`;
  }
  return 'no error';
}

describe('payload codec', () => {
  it('fits shapes with wildcards', () => {
    expect(fitShape([-1, 4], [2, 4], 8)).toEqual([2, 4]);
    expect(fitShape([-1, 4], [8], 8)).toEqual([2, 4]);
    expect(fitShape([3], [3], 3)).toEqual([3]);
    expect(fitShape([-1], [5], 5)).toEqual([5]);
    expect(fitShape([-1, 4], [6], 6)).toBeNull();
    expect(fitShape([-1, -1], [6], 6)).toBeNull();
    expect(fitShape([2, 2], [4], 4)).toEqual([2, 2]);
  });

  it('encodes JSON inputs to little-endian bytes with shapes from nesting', () => {
    const f = fn([spec('x', 'FP32', [-1, 2]), spec('n', 'INT64', [1]), spec('s', 'BYTES', [-1])]);
    const { inputs } = jsonInputs(f, {
      inputs: {
        x: [
          [1, 2],
          [3, 4.5],
        ],
        n: [7],
        s: ['ab', 'c'],
      },
    });
    expect(inputs[0]!.shape).toEqual([2, 2]);
    expect([...new Float32Array(inputs[0]!.bytes.buffer.slice(inputs[0]!.bytes.byteOffset, inputs[0]!.bytes.byteOffset + 16))]).toEqual([
      1, 2, 3, 4.5,
    ]);
    expect(Buffer.from(inputs[1]!.bytes).readBigInt64LE(0)).toBe(7n);
    expect(deserializeBytes(inputs[2]!.bytes).map((b) => Buffer.from(b).toString())).toEqual(['ab', 'c']);
  });

  it('takes explicit tensors and base64 bytes', () => {
    const f = fn([spec('img', 'UINT8', [-1]), spec('x', 'INT32', [-1, 2])]);
    const { inputs } = jsonInputs(f, {
      inputs: { img: { b64: Buffer.from([1, 2, 3]).toString('base64') }, x: { data: [1, 2, 3, 4], shape: [2, 2], datatype: 'INT32' } },
    });
    expect([...inputs[0]!.bytes]).toEqual([1, 2, 3]);
    expect(inputs[0]!.shape).toEqual([3]);
    expect(inputs[1]!.shape).toEqual([2, 2]);
  });

  it('names the input at fault', () => {
    const f = fn([spec('x', 'FP32', [-1, 2])]);
    expect(code(() => jsonInputs(f, { inputs: {} }))).toBe("INPUT_MISSING: function 'f' requires input 'x'");
    expect(code(() => jsonInputs(f, { inputs: { x: [1, 2], y: 1 } }))).toBe("INPUT_UNKNOWN: function 'f' has no input 'y'");
    expect(code(() => jsonInputs(f, { inputs: { x: [1, 2, 3] } }))).toMatch(
      /^INPUT_INVALID: input 'x' of function 'f' is invalid: shape \[3\]/,
    );
    expect(code(() => jsonInputs(f, { inputs: { x: [[1, 2], [3]] } }))).toMatch(/INPUT_INVALID: .*ragged/);
    expect(code(() => jsonInputs(f, { inputs: { x: ['a', 'b'] } }))).toMatch(/INPUT_INVALID: .*element 0 must be a number/);
    expect(code(() => jsonInputs(f, { inputs: { x: { data: [1, 2], datatype: 'INT8' } } }))).toMatch(
      /datatype INT8 does not match the expected FP32/,
    );
    expect(code(() => jsonInputs(f, { nope: 1 }))).toMatch(/^BODY_INVALID/);
    const i = fn([spec('k', 'INT32', [-1])]);
    expect(code(() => jsonInputs(i, { inputs: { k: [1.5] } }))).toMatch(/must be an integer for INT32/);
  });

  it('fills the single UINT8/BYTES input from a raw body and refuses otherwise', () => {
    const u8 = fn([spec('img', 'UINT8', [-1])]);
    expect(rawBodySpec(u8).name).toBe('img');
    expect(bytesInput(u8, u8.inputs[0]!, new Uint8Array(10)).shape).toEqual([10]);
    const b = fn([spec('doc', 'BYTES', [1])]);
    const t = bytesInput(b, b.inputs[0]!, Buffer.from('hello'));
    expect(t.shape).toEqual([1]);
    expect(Buffer.from(deserializeBytes(t.bytes)[0]!).toString()).toBe('hello');
    expect(code(() => rawBodySpec(fn([spec('x', 'FP32', [2])])))).toMatch(/^RAW_BODY_AMBIGUOUS/);
    expect(code(() => rawBodySpec(fn([spec('a', 'UINT8', [-1]), spec('b', 'UINT8', [-1])])))).toMatch(/^RAW_BODY_AMBIGUOUS/);
  });

  it('reads multipart file and text fields', async () => {
    const f = fn([spec('img', 'UINT8', [-1]), spec('k', 'INT32', [1])]);
    const form = new FormData();
    form.append('img', new Blob([new Uint8Array([9, 8, 7])]), 'a.jpg');
    form.append('k', '[5]');
    const ins = await multipartInputs(f, form);
    expect([...ins[0]!.bytes]).toEqual([9, 8, 7]);
    expect(Buffer.from(ins[1]!.bytes).readInt32LE(0)).toBe(5);
    const bad = new FormData();
    bad.append('img', new Blob([new Uint8Array([1])]));
    await expect(multipartInputs(f, bad)).rejects.toMatchObject({ code: 'INPUT_MISSING' });
  });

  it('predicts output sizes only when the shape is known', () => {
    const f = fn([spec('x', 'FP32', [-1, 64])], [spec('y', 'FP32', [-1, 100]), spec('z', 'BYTES', [1])]);
    const { inputs } = jsonInputs(f, { inputs: { x: new Array(128).fill(0) } });
    expect(predictOutputBytes(f, f.outputs[0]!, inputs)).toBe(2 * 100 * 4);
    expect(predictOutputBytes(f, f.outputs[1]!, inputs)).toBe(-1);
    const g = fn([spec('img', 'UINT8', [-1])], [spec('v', 'FP32', [512])]);
    expect(predictOutputBytes(g, g.outputs[0]!, [])).toBe(2048);
  });

  it('round-trips every fixed datatype through encode/decode', () => {
    const cases: Array<[string, number[] | boolean[]]> = [
      ['BOOL', [true, false]],
      ['UINT8', [0, 255]],
      ['INT8', [-128, 127]],
      ['UINT16', [65535]],
      ['INT16', [-32768]],
      ['UINT32', [4294967295]],
      ['INT32', [-5]],
      ['UINT64', [2 ** 40]],
      ['INT64', [-(2 ** 40)]],
      ['FP16', [1.5, -2]],
      ['BF16', [1, -0.5]],
      ['FP32', [0.25]],
      ['FP64', [Math.PI]],
    ];
    for (const [dt, vals] of cases) expect(decodeValues(dt, encodeValues(dt, vals)), dt).toEqual(vals);
    const o = outputsJson([{ spec: spec('v', 'FP32', [2]), shape: [2], datatype: 'FP32', bytes: encodeValues('FP32', [1, 2]) }]);
    expect(o).toEqual({ outputs: { v: { shape: [2], datatype: 'FP32', data: [1, 2] } } });
  });
});
