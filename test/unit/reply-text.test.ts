// The native float formatter (native numbersJson) and the gateway's reply
// text built on it (gateway/calls/reply-text.ts) against what they replace:
// JSON.stringify(Array.from(view)) and JSON.stringify(replyJson(fn, outputs)).
// fast-check draws arbitrary doubles and float32s (subnormals, -0, NaN, the
// infinities, every exponent) and arbitrary replies; the edge cases of the
// number layout (plain up to 1e21, 0.000001 against 1e-7, the exponent's
// sign) are named too, so a failure says which rule broke.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { numbersJson } from '../../native/index.ts';
import type { ResolvedFunction, TensorSpec } from '../../gateway/calls/function-registry.ts';
import { implicitDefinition } from '../../gateway/calls/function-registry.ts';
import type { OutputTensor } from '../../gateway/calls/payload-codec.ts';
import { replyJson } from '../../gateway/calls/reply-rows.ts';
import { replyJsonText } from '../../gateway/calls/reply-text.ts';
import { encodeValues } from '../../gateway/calls/tensor-data.ts';

const RUNS = Number(process.env.FUZZ_RUNS ?? 2000);
const asJson = (v: Float32Array | Float64Array) => JSON.stringify(Array.from(v));

describe('numbersJson (native)', () => {
  it('writes the layout rules of Number::toString as JSON.stringify does', () => {
    const named = [
      0,
      -0,
      1,
      -1,
      0.5,
      100,
      123456789,
      1e20,
      1e21,
      1.5e21,
      123456789012345680000,
      1e-6,
      0.000001,
      1.5e-6,
      1e-7,
      1.5e-7,
      1.2e-18,
      5e-324,
      2.2250738585072014e-308,
      1.7976931348623157e308,
      -1.5e300,
      0.1,
      0.2 + 0.1,
      1 / 3,
      NaN,
      Infinity,
      -Infinity,
      9007199254740993,
    ];
    for (const x of named) expect(numbersJson(new Float64Array([x])), String(x)).toBe(asJson(new Float64Array([x])));
    expect(numbersJson(new Float64Array(0))).toBe('[]');
    const f32 = new Float32Array([0.1, 1e-45, 3.4028234663852886e38, 16777217, -0.000123, NaN, -Infinity]);
    expect(numbersJson(f32)).toBe(asJson(f32));
  });

  it('matches JSON.stringify on arbitrary doubles', () => {
    fc.assert(
      fc.property(fc.array(fc.double(), { maxLength: 40 }), (xs) => {
        const v = new Float64Array(xs);
        return numbersJson(v) === asJson(v);
      }),
      { numRuns: RUNS },
    );
  });

  it('matches JSON.stringify on arbitrary float32s, as an FP32 reply carries them', () => {
    fc.assert(
      fc.property(fc.array(fc.float(), { maxLength: 40 }), (xs) => {
        const v = new Float32Array(xs);
        return numbersJson(v) === asJson(v);
      }),
      { numRuns: RUNS },
    );
  });

  it('reads a view at its offset and length, and refuses what is not a float array', () => {
    const all = new Float64Array([1, 2.5, 3, 4]);
    expect(numbersJson(all.subarray(1, 3))).toBe('[2.5,3]');
    expect(() => numbersJson(new Int32Array(2) as unknown as Float32Array)).toThrow(/Float32Array or Float64Array/);
    expect(() => numbersJson([1, 2] as unknown as Float32Array)).toThrow(/Float32Array or Float64Array/);
  });
});

const NAMES = ['scores', 'OUTPUT0', '_x', '$y', 'a.b', '0', '12', '__proto__', 'constructor', 'é', 'x y', '-1'];
const DATATYPES = ['FP32', 'FP64', 'INT32', 'UINT8', 'BOOL', 'BYTES', 'FP16', 'INT64'];

function fnWith(outputs: TensorSpec[], rows?: boolean): ResolvedFunction {
  const definition = implicitDefinition('f');
  if (rows) definition.rows = { key: 'rows', fields: { s: outputs[0]!.name } };
  return { name: 'f', model: 'm', version: '', platform: 'p', implicit: true, definition, inputs: [], outputs };
}

function values(dt: string, n: number, seed: number[]): Array<number | boolean | string> {
  const at = (i: number) => seed[i % seed.length] ?? 0;
  if (dt === 'BOOL') return Array.from({ length: n }, (_, i) => at(i) > 0);
  if (dt === 'BYTES') return Array.from({ length: n }, (_, i) => `s${at(i)}"\\`);
  if (dt === 'FP32' || dt === 'FP64' || dt === 'FP16') return Array.from({ length: n }, (_, i) => at(i));
  return Array.from({ length: n }, (_, i) => (Number.isFinite(at(i)) ? Math.abs(Math.trunc(at(i)) % 100) : 0));
}

const outputArb = fc.record({
  name: fc.constantFrom(...NAMES),
  datatype: fc.constantFrom(...DATATYPES),
  n: fc.integer({ min: 0, max: 6 }),
  seed: fc.array(fc.double(), { minLength: 1, maxLength: 6 }),
  unaligned: fc.boolean(),
});

function outputOf(o: { name: string; datatype: string; n: number; seed: number[]; unaligned: boolean }): OutputTensor {
  // Floats as the engine sends them, NaN and the infinities included (encodeValues refuses those from JSON).
  const vs = values(o.datatype, o.n, o.seed);
  const bytes =
    o.datatype === 'FP32'
      ? new Uint8Array(Float32Array.from(vs as number[]).buffer)
      : o.datatype === 'FP64'
        ? new Uint8Array(Float64Array.from(vs as number[]).buffer)
        : encodeValues(
            o.datatype,
            vs.map((v) => (typeof v === 'number' && !Number.isFinite(v) ? 0 : v)),
          );
  // A tensor can sit at any byte offset of a received message: the formatter must read it the same.
  const placed = o.unaligned ? new Uint8Array(bytes.byteLength + 1).fill(7) : bytes;
  if (o.unaligned) placed.set(bytes, 1);
  return {
    spec: { name: o.name, tensor: o.name.toUpperCase(), datatype: o.datatype, shape: [-1] },
    shape: [1, o.n],
    datatype: o.datatype,
    bytes: o.unaligned ? placed.subarray(1) : bytes,
  };
}

describe('replyJsonText', () => {
  it('is JSON.stringify(replyJson(...)) for arbitrary outputs, names and datatypes', () => {
    fc.assert(
      fc.property(fc.array(outputArb, { maxLength: 4 }), fc.boolean(), (os, rows) => {
        const outputs = os.map(outputOf);
        const fn = fnWith(
          outputs.length ? outputs.map((t) => t.spec) : [{ name: 'scores', tensor: 'S', datatype: 'FP32', shape: [-1] }],
          rows,
        );
        let want: string;
        try {
          want = JSON.stringify(replyJson(fn, outputs));
        } catch (e) {
          expect(() => replyJsonText(fn, outputs)).toThrow((e as Error).message);
          return;
        }
        expect(replyJsonText(fn, outputs)).toBe(want);
      }),
      { numRuns: RUNS },
    );
  });

  it('writes the recommender reply as the engine gives it', () => {
    const scores = Float32Array.from({ length: 100 }, (_, i) => 1 / (1 + Math.exp(-Math.sin(i * 1.3) * 3)));
    const spec = { name: 'scores', tensor: 'scores', datatype: 'FP32', shape: [-1, 100] };
    const out: OutputTensor = { spec, shape: [1, 100], datatype: 'FP32', bytes: new Uint8Array(scores.buffer) };
    const text = replyJsonText(fnWith([spec]), [out]);
    expect(JSON.parse(text)).toEqual({ outputs: { scores: { shape: [1, 100], datatype: 'FP32', data: Array.from(scores) } } });
    expect(text).toBe(JSON.stringify(replyJson(fnWith([spec]), [out])));
  });
});
