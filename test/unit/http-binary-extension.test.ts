import { describe, expect, it } from 'vitest';
import { assembleBody, BinaryInputReader, splitBody } from '../../engine/frontends/http/binary-extension.ts';
import { encodeInferResponse, parseInferRequest } from '../../engine/frontends/http/infer-json.ts';
import type { InferResponse } from '../../engine/api/infer-request.ts';

const i32 = (...v: number[]) => new Uint8Array(new Int32Array(v).buffer);
/** Copy first: Buffer#slice is a view over a pooled ArrayBuffer. */
const ints = (u: Uint8Array) => [...new Int32Array(Uint8Array.from(u).buffer)];

function binaryBody(header: object, ...tails: Uint8Array[]): { body: Buffer; len: string } {
  const json = Buffer.from(JSON.stringify(header));
  return { body: Buffer.concat([json, ...tails]), len: String(json.length) };
}

describe('splitBody / BinaryInputReader', () => {
  it('splits at the header length and hands out consecutive views', () => {
    const { json, binary } = splitBody(Buffer.from('{"a":1}XYZW'), '7');
    expect(json.toString()).toBe('{"a":1}');
    const r = new BinaryInputReader(binary);
    expect(Buffer.from(r.take('A', 1)).toString()).toBe('X');
    expect(Buffer.from(r.take('B', 3)).toString()).toBe('YZW');
    r.finish();
  });

  it('rejects bad header lengths, overruns and unclaimed bytes', () => {
    expect(() => splitBody(Buffer.from('{}'), 'abc')).toThrow(/Inference-Header-Content-Length/);
    expect(() => splitBody(Buffer.from('{}'), '10')).toThrow(/exceeds/);
    const r = new BinaryInputReader(Buffer.alloc(4));
    expect(() => r.take('IN', 8)).toThrow(/'IN'.*8/);
    r.take('IN', 2);
    expect(() => r.finish()).toThrow(/2 bytes/);
  });

  it('assembles JSON alone or JSON + binary with the header length', () => {
    expect(assembleBody('{}', []).headerLength).toBeUndefined();
    const { body, headerLength } = assembleBody('{"x":1}', [Buffer.from('ab'), Buffer.from('c')]);
    expect(headerLength).toBe(7);
    expect(body.toString()).toBe('{"x":1}abc');
  });
});

describe('parseInferRequest', () => {
  it('reads mixed binary and JSON inputs, outputs and parameters', () => {
    const { body, len } = binaryBody(
      {
        id: 'r1',
        parameters: { binary_data_output: true, priority: 2, timeout: 100, custom: 'x' },
        inputs: [
          { name: 'A', datatype: 'INT32', shape: [1, 2], parameters: { binary_data_size: 8 } },
          { name: 'B', datatype: 'INT32', shape: [2], data: [5, 6] },
        ],
        outputs: [{ name: 'O', parameters: { binary_data: false, classification: 2 } }, { name: 'P' }],
      },
      i32(1, 2),
    );
    const { request, binaryOutputDefault } = parseInferRequest(body, len, 'm', '3');
    expect(binaryOutputDefault).toBe(true);
    expect(request).toMatchObject({ modelName: 'm', modelVersion: '3', id: 'r1', priority: 2, timeoutUs: 100 });
    expect(request.parameters).toEqual({ custom: 'x' });
    expect(request.inputs.map((i) => [i.name, ints(i.data)])).toEqual([
      ['A', [1, 2]],
      ['B', [5, 6]],
    ]);
    expect(request.outputs).toEqual([{ name: 'O', binary: false, classification: 2 }, { name: 'P' }]);
  });

  it('maps shared-memory parameters and leaves data empty', () => {
    const body = Buffer.from(
      JSON.stringify({
        inputs: [
          {
            name: 'A',
            datatype: 'FP32',
            shape: [4],
            parameters: { shared_memory_region: 'r', shared_memory_byte_size: 16, shared_memory_offset: 32 },
          },
        ],
        outputs: [{ name: 'O', parameters: { shared_memory_region: 'o', shared_memory_byte_size: 8 } }],
      }),
    );
    const { request } = parseInferRequest(body, undefined, 'm', undefined);
    expect(request.modelVersion).toBeUndefined();
    expect(request.inputs[0]!.shm).toEqual({ region: 'r', offset: 32, byteSize: 16 });
    expect(request.inputs[0]!.data.byteLength).toBe(0);
    expect(request.outputs[0]!.shm).toEqual({ region: 'o', offset: 0, byteSize: 8 });
  });

  it('rejects a binary size that does not match the shape, naming the input', () => {
    const { body, len } = binaryBody(
      { inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [3], parameters: { binary_data_size: 8 } }] },
      i32(1, 2),
    );
    expect(() => parseInferRequest(body, len, 'm', undefined)).toThrow(/'INPUT0'.*8.*12/);
  });

  it('rejects malformed JSON, unknown datatypes and missing data', () => {
    expect(() => parseInferRequest(Buffer.from('{"inputs": ['), undefined, 'm', undefined)).toThrow(/JSON/);
    const bad = (input: object) => Buffer.from(JSON.stringify({ inputs: [input] }));
    expect(() => parseInferRequest(bad({ name: 'X', datatype: 'FLOAT', shape: [1], data: [1] }), undefined, 'm', undefined)).toThrow(
      /input 'X' has unknown datatype 'FLOAT'/,
    );
    expect(() => parseInferRequest(bad({ name: 'X', datatype: 'FP32', shape: [1] }), undefined, 'm', undefined)).toThrow(
      /'X' has no 'data'/,
    );
    expect(() => parseInferRequest(bad({ name: 'X', datatype: 'FP32', shape: [-1], data: [] }), undefined, 'm', undefined)).toThrow(
      /'shape' of input 'X'/,
    );
  });
});

describe('encodeInferResponse', () => {
  const resp: InferResponse = {
    modelName: 'm',
    modelVersion: '1',
    id: 'q',
    outputs: [
      { name: 'J', datatype: 'INT32', shape: [2], data: i32(7, -8) },
      { name: 'B', datatype: 'INT32', shape: [1], data: i32(9) },
      { name: 'S', datatype: 'FP32', shape: [2], data: new Uint8Array(0), shm: { region: 'out', offset: 4, byteSize: 8 } },
    ],
  };

  it('returns JSON data, binary tails, and for shm outputs name, datatype and shape only (as Triton)', () => {
    const { body, headerLength } = encodeInferResponse(resp, [{ name: 'J' }, { name: 'B', binary: true }, { name: 'S' }], false);
    expect(headerLength).toBeDefined();
    const head = JSON.parse(body.subarray(0, headerLength).toString());
    expect(head).toEqual({
      model_name: 'm',
      model_version: '1',
      id: 'q',
      outputs: [
        { name: 'J', datatype: 'INT32', shape: [2], data: [7, -8] },
        { name: 'B', datatype: 'INT32', shape: [1], parameters: { binary_data_size: 4 } },
        { name: 'S', datatype: 'FP32', shape: [2] },
      ],
    });
    expect(ints(body.subarray(headerLength))).toEqual([9]);
  });

  it('is pure JSON when nothing is binary, and honours binary_data_output', () => {
    const plain = encodeInferResponse({ ...resp, outputs: resp.outputs.slice(0, 1) }, [], false);
    expect(plain.headerLength).toBeUndefined();
    expect(JSON.parse(plain.body.toString()).outputs[0].data).toEqual([7, -8]);
    const bin = encodeInferResponse({ ...resp, outputs: resp.outputs.slice(0, 1) }, [], true);
    expect(bin.body.length - bin.headerLength!).toBe(8);
  });
});
