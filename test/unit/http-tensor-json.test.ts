import { describe, expect, it } from 'vitest';
import { flattenData, jsonToTensorBytes, tensorBytesToJson } from '../../engine/frontends/http/tensor-json.ts';
import { deserializeBytes, fp16ToNumber, serializeBytes } from '../../engine/api/datatypes.ts';
import { StatusError } from '../../engine/api/status.ts';

const errOf = (f: () => unknown): StatusError => {
  try {
    f();
  } catch (e) {
    return e as StatusError;
  }
  throw new Error('expected a throw');
};

describe('jsonToTensorBytes', () => {
  it('encodes flat and nested INT32 data row-major, little-endian', () => {
    const flat = jsonToTensorBytes('X', 'INT32', [2, 2], [1, -2, 3, 2147483647]);
    const nested = jsonToTensorBytes(
      'X',
      'INT32',
      [2, 2],
      [
        [1, -2],
        [3, 2147483647],
      ],
    );
    expect(Buffer.from(nested)).toEqual(Buffer.from(flat));
    const dv = new DataView(flat.buffer, flat.byteOffset);
    expect([dv.getInt32(0, true), dv.getInt32(4, true), dv.getInt32(8, true), dv.getInt32(12, true)]).toEqual([1, -2, 3, 2147483647]);
  });

  it('encodes BOOL, FP32, FP64, INT64, UINT8, FP16 and BYTES', () => {
    expect([...jsonToTensorBytes('B', 'BOOL', [3], [true, false, true])]).toEqual([1, 0, 1]);
    const f = jsonToTensorBytes('F', 'FP32', [2], [1.5, -0.25]);
    expect([...new Float32Array(f.buffer, f.byteOffset, 2)]).toEqual([1.5, -0.25]);
    const d = jsonToTensorBytes('D', 'FP64', [1], [0.1]);
    expect(new Float64Array(d.buffer, d.byteOffset, 1)[0]).toBe(0.1);
    const l = jsonToTensorBytes('L', 'INT64', [2], [-5, 2 ** 40]);
    expect([...new BigInt64Array(l.buffer, l.byteOffset, 2)]).toEqual([-5n, 2n ** 40n]);
    expect([...jsonToTensorBytes('U', 'UINT8', [2], [0, 255])]).toEqual([0, 255]);
    const h = jsonToTensorBytes('H', 'FP16', [2], [1, -2.5]);
    const hv = new Uint16Array(h.buffer, h.byteOffset, 2);
    expect([fp16ToNumber(hv[0]!), fp16ToNumber(hv[1]!)]).toEqual([1, -2.5]);
    const s = jsonToTensorBytes('S', 'BYTES', [2], ['hé', '']);
    expect(deserializeBytes(s).map((b) => Buffer.from(b).toString())).toEqual(['hé', '']);
  });

  it('rejects element count mismatches naming the input', () => {
    const e = errOf(() => jsonToTensorBytes('INPUT0', 'INT32', [16], [1, 2, 3]));
    expect(e.code).toBe('INVALID_ARG');
    expect(e.message).toContain("'INPUT0'");
    expect(e.message).toContain('16');
  });

  it('rejects wrongly typed and out-of-range elements naming input and element', () => {
    expect(errOf(() => jsonToTensorBytes('A', 'INT32', [2], [1, 'x'])).message).toMatch(/element 1 of input 'A'.*INT32/);
    expect(errOf(() => jsonToTensorBytes('A', 'INT8', [1], [200])).message).toMatch(/input 'A'/);
    expect(errOf(() => jsonToTensorBytes('A', 'UINT32', [1], [-1])).message).toMatch(/input 'A'/);
    expect(errOf(() => jsonToTensorBytes('A', 'INT32', [1], [1.5])).message).toMatch(/input 'A'/);
    expect(errOf(() => jsonToTensorBytes('B', 'BOOL', [1], [1])).message).toMatch(/input 'B'.*BOOL/);
    expect(errOf(() => jsonToTensorBytes('S', 'BYTES', [1], [3])).message).toMatch(/input 'S'.*BYTES/);
    expect(errOf(() => jsonToTensorBytes('F', 'FP32', [1], 'abc')).message).toMatch(/'data' of input 'F'/);
  });

  it('flattens deep nesting and leaves flat arrays uncopied', () => {
    const flat = [1, 2, 3];
    expect(flattenData(flat, 'x')).toBe(flat);
    expect(
      flattenData(
        [
          [[1], [2]],
          [[3], [4]],
        ],
        'x',
      ),
    ).toEqual([1, 2, 3, 4]);
  });
});

describe('tensorBytesToJson', () => {
  it('round-trips every JSON-representable type', () => {
    const cases: Array<[Parameters<typeof jsonToTensorBytes>[1], unknown[]]> = [
      ['INT32', [1, -2, 3]],
      ['UINT16', [0, 65535]],
      ['FP32', [1.5, -0.25]],
      ['FP64', [0.1, 1e300]],
      ['BOOL', [true, false]],
      ['INT64', [-7, 2 ** 50]],
      ['BF16', [1, -2]],
      ['BYTES', ['a', 'bc']],
    ];
    for (const [dt, data] of cases) {
      const bytes = jsonToTensorBytes('T', dt, [data.length], data);
      expect(JSON.parse(tensorBytesToJson('T', dt, bytes)), dt).toEqual(data);
    }
  });

  it('writes INT64 exactly beyond 2^53 and non-finite floats as null', () => {
    const big = new BigInt64Array([9007199254740993n]);
    expect(tensorBytesToJson('L', 'INT64', new Uint8Array(big.buffer))).toBe('[9007199254740993]');
    const f = new Float32Array([1, NaN, Infinity]);
    expect(tensorBytesToJson('F', 'FP32', new Uint8Array(f.buffer))).toBe('[1,null,null]');
  });

  it('decodes BYTES elements as UTF-8 strings', () => {
    expect(JSON.parse(tensorBytesToJson('S', 'BYTES', serializeBytes(['x"y', 'ü'])))).toEqual(['x"y', 'ü']);
  });

  it('handles unaligned views and rejects a truncated tensor', () => {
    const buf = new Uint8Array(9);
    new DataView(buf.buffer).setInt32(1, 42, true);
    new DataView(buf.buffer).setInt32(5, -1, true);
    expect(tensorBytesToJson('U', 'INT32', buf.subarray(1))).toBe('[42,-1]');
    expect(errOf(() => tensorBytesToJson('O', 'INT32', new Uint8Array(6))).message).toContain("'O'");
  });
});
