// Triton's generate extension JSON (engine/frontends/http/generate-json.ts):
// top-level keys with repeats, shapes from the config's dims, inputs vs
// parameters, the reply object, SSE framing.
import { describe, expect, it } from 'vitest';
import { generateResponseJson, generateShape, parseGenerateRequest, topLevelKeys } from '../../engine/frontends/http/generate-json.ts';
import type { ModelConfig } from '../../engine/api/model-config.ts';
import { encodeValues } from '../../protocol/tensor-codec.ts';

const config = (max_batch_size: number, input: Array<{ name: string; data_type: string; dims: number[] }>) =>
  ({ name: 'm', max_batch_size, input, output: [] }) as unknown as ModelConfig;

describe('topLevelKeys', () => {
  it('lists the top-level keys in order, repeats included, ignoring nested and quoted look-alikes', () => {
    expect(topLevelKeys('{"a": 1, "b": {"a": 2, "c": [ {"d": 1} ]}, "a": "x,\\"y\\":", "e": [1, "f"]}')).toEqual(['a', 'b', 'a', 'e']);
    expect(topLevelKeys('{}')).toEqual([]);
  });
});

describe('generateShape', () => {
  it('fills variable dims, adds a batch of one, falls back to [n]', () => {
    expect(generateShape(config(0, []), [1, 1], 1)).toEqual([1, 1]);
    expect(generateShape(config(0, []), [1, -1], 3)).toEqual([1, 3]);
    expect(generateShape(config(4, []), [1], 1)).toEqual([1, 1]);
    expect(generateShape(config(4, []), [-1], 5)).toEqual([1, 5]);
    expect(generateShape(config(0, []), [-1, 2], 6)).toEqual([3, 2]);
    expect(generateShape(config(0, []), [2], 3)).toEqual([3]);
    expect(generateShape(config(0, []), [-1, 2], 3)).toEqual([3]);
  });
});

describe('parseGenerateRequest', () => {
  const cfg = config(0, [
    { name: 'PROMPT', data_type: 'TYPE_STRING', dims: [1, 1] },
    { name: 'N', data_type: 'TYPE_INT32', dims: [-1] },
  ]);
  it('maps input keys to tensors and every other key (and `parameters`) to parameters', () => {
    const r = parseGenerateRequest(
      Buffer.from('{"PROMPT": "hi", "N": [1, 2], "temperature": 0.5, "parameters": {"stream": false}}'),
      cfg,
      'm',
      undefined,
    );
    expect(r.inputs.map((t) => [t.name, t.datatype, t.shape])).toEqual([
      ['PROMPT', 'BYTES', [1, 1]],
      ['N', 'INT32', [2]],
    ]);
    expect(Buffer.from(r.inputs[1]!.data)).toEqual(Buffer.from(encodeValues('INT32', [1, 2])));
    expect(r.parameters).toEqual({ temperature: 0.5, stream: false });
  });
  it("refuses with Triton's texts", () => {
    const bad = (s: string) => () => parseGenerateRequest(Buffer.from(s), cfg, 'm', undefined);
    expect(bad('{"PROMPT": 1}')).toThrow('attempt to access JSON non-string as string');
    expect(bad('{"N": ["x"]}')).toThrow('attempt to access JSON non-signed-integer as signed-integer');
    expect(bad('{"PROMPT": "a", "PROMPT": "b"}')).toThrow("input 'PROMPT' already exists in request");
    expect(bad('{"X": {"y": 1}}')).toThrow("parameter 'X' has invalid type");
    expect(bad('[1]')).toThrow('must be a JSON object');
    expect(bad('{')).toThrow('failed to parse');
  });
});

describe('reply', () => {
  it('one element is a scalar, more a flat array; SSE frames one data line', () => {
    const body = generateResponseJson({
      modelName: 'm',
      modelVersion: '1',
      outputs: [
        { name: 'TEXT', datatype: 'BYTES', shape: [1, 1], data: encodeValues('BYTES', ['x']) },
        { name: 'IDS', datatype: 'INT32', shape: [2], data: encodeValues('INT32', [3, 4]) },
      ],
    });
    expect(body).toEqual({ model_name: 'm', model_version: '1', TEXT: 'x', IDS: [3, 4] });
  });
});
