// gateway/calls/json-body.ts (the native number scanner, then JSON.parse on the
// rest) against JSON.parse alone: the same value once markers are put back
// as the arrays they stand for, the same error for a body that is not JSON,
// and through json-inputs-fast.ts the same tensors as from JSON.parse's value.
// fast-check draws arbitrary JSON (fc.json), bodies with long number arrays
// in every position, and damaged texts.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ResolvedFunction, TensorSpec } from '../../gateway/calls/function-registry.ts';
import type { FunctionDefinition } from '../../gateway/calls/function-schema.ts';
import { markerOf, MIN_SCANNED, parseScanned } from '../../gateway/calls/json-body.ts';
import { fastJsonInputs } from '../../gateway/calls/json-inputs-fast.ts';

const RUNS = Number(process.env.FUZZ_RUNS ?? 1500);

/** The value with each marker replaced by the array of numbers it stands for. */
function expand(v: unknown, numbers: Float64Array | undefined): unknown {
  const m = numbers ? markerOf(v) : undefined;
  if (m) return Array.from(numbers!.subarray(m[0], m[0] + m[1]));
  if (Array.isArray(v)) return v.map((x) => expand(x, numbers));
  if (v && typeof v === 'object') {
    const o: Record<string, unknown> = {};
    for (const k of Object.keys(v))
      Object.defineProperty(o, k, {
        value: expand((v as Record<string, unknown>)[k], numbers),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    return o;
  }
  return v;
}

interface Outcome {
  ok: boolean;
  json?: string;
  value?: unknown;
  error?: string;
  marked?: boolean;
}

function outcome(text: string): Outcome {
  try {
    const v = JSON.parse(text);
    return { ok: true, json: JSON.stringify(v), value: v };
  } catch (e) {
    return { ok: false, error: (e as Error).name };
  }
}

function scanned(text: string): Outcome {
  try {
    const { value, numbers } = parseScanned(Buffer.from(text));
    const v = expand(value, numbers);
    return { ok: true, json: JSON.stringify(v), value: v, marked: numbers !== undefined && JSON.stringify(value) !== JSON.stringify(v) };
  } catch (e) {
    return { ok: false, error: (e as Error).name };
  }
}

const longNumbers = fc.array(
  fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer(), fc.float({ noNaN: true, noDefaultInfinity: true })),
  {
    minLength: MIN_SCANNED,
    maxLength: 40,
  },
);
const spaced = (s: string, ws: string) => s.replace(/,/g, `,${ws}`).replace(/\[/g, `[${ws}`);

describe('parseScanned', () => {
  it('gives JSON.parse value (markers put back) or its error, on arbitrary JSON', () => {
    fc.assert(
      fc.property(fc.json({ maxDepth: 4 }), (text) => {
        const want = outcome(text);
        const got = scanned(text);
        expect(got.ok).toBe(want.ok);
        if (want.ok && got.ok) {
          expect(got.json).toBe(want.json);
          expect(got.value).toEqual(want.value);
        }
      }),
      { numRuns: RUNS },
    );
  });

  it('reads long number arrays anywhere, in any spacing, to the same doubles', () => {
    let marked = 0;
    fc.assert(
      fc.property(longNumbers, fc.constantFrom('', ' ', '\n\t', '  \r\n'), fc.nat(3), (xs, ws, where) => {
        const arr = spaced(JSON.stringify(xs), ws);
        const text = [
          arr,
          `{"inputs":{"x":{"data":${arr},"shape":[1,${xs.length}]}}}`,
          `[[${arr.slice(1, -1)}],${arr},"s",[1,2]]`,
          `{"a":[${arr},{"b":${arr}}]}`,
        ][where]!;
        const got = scanned(text);
        const want = outcome(text);
        expect(got.ok && want.ok && got.json === want.json).toBe(true);
        if (got.ok) expect(got.value).toEqual(want.value);
        if (got.marked) marked++;
      }),
      { numRuns: RUNS },
    );
    expect(marked).toBeGreaterThan(RUNS / 2); // the scanner did read them
  });

  it('refuses what JSON.parse refuses, and leaves the odd bodies to it', () => {
    const bad = [
      '[1,2,]',
      '{[1,2]:3}',
      '[01,' + '1,'.repeat(20) + '1]',
      '[1.,' + '2,'.repeat(20) + '2]',
      '{"a":1}x',
      '',
      '[',
      '{"a" 1}',
      'tru',
      '"\u0001"',
      '[-]',
    ];
    for (const t of bad) {
      expect(outcome(t).ok, t).toBe(false);
      expect(scanned(t), t).toEqual(outcome(t));
    }
    // Outside the scanner's subset, JSON.parse reads them: escapes, non-ASCII, a U+0001 that is not a marker, a deep body.
    const odd = [
      '{"a":"x\\n","b":[' + '1,'.repeat(20) + '1]}',
      '{"é":[' + '2,'.repeat(20) + '2]}',
      '["\\u00010,3"]',
      '['.repeat(70) + ']'.repeat(70),
      '[1e-400' + ',1'.repeat(20) + ']',
      '[1e400' + ',1'.repeat(20) + ']',
    ];
    for (const t of odd) {
      const got = scanned(t);
      expect(got.ok, t).toBe(true);
      expect(got.json).toBe(outcome(t).json);
    }
    expect(parseScanned(Buffer.from('["\\u00010,3"]')).numbers).toBeUndefined();
  });

  it('grows its buffer for a body with more numbers than it holds', () => {
    const xs = Array.from({ length: 5000 }, (_, i) => i / 7);
    const { value, numbers } = parseScanned(Buffer.from(JSON.stringify({ d: xs, e: xs })));
    expect(expand(value, numbers)).toEqual({ d: xs, e: xs });
  });
});

function fn(inputs: Array<Omit<TensorSpec, 'tensor'>>): ResolvedFunction {
  return {
    name: 'f',
    model: 'm',
    version: '',
    platform: 'onnxruntime_onnx',
    implicit: false,
    definition: { name: 'f', target: { model: 'm' }, limits: { maxBodyBytes: 1 << 20, timeoutMs: 1000 } } as unknown as FunctionDefinition,
    inputs: inputs.map((i) => ({ ...i, tensor: i.name.toUpperCase() })),
    outputs: [{ name: 'y', tensor: 'Y', datatype: 'FP32', shape: [-1] }],
  };
}

const FUNCTIONS = [
  fn([{ name: 'x', datatype: 'FP32', shape: [-1, -1] }]),
  fn([{ name: 'x', datatype: 'FP32', shape: [-1, 20] }]),
  fn([
    { name: 'x', datatype: 'INT32', shape: [-1] },
    { name: 'w', datatype: 'FP64', shape: [2, -1] },
  ]),
  fn([{ name: 'x', datatype: 'UINT8', shape: [-1, -1] }]),
];

const element = fc.oneof(
  fc.integer({ min: -300, max: 300 }),
  fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e6, max: 1e6 }),
  fc.constantFrom(2 ** 31, 0.5, 255, 256, -1),
);
const rows = fc
  .tuple(fc.integer({ min: 1, max: 3 }), fc.integer({ min: MIN_SCANNED - 2, max: 24 }), fc.boolean())
  .chain(([r, c, ragged]) => fc.array(fc.array(element, { minLength: ragged ? c - 1 : c, maxLength: c }), { minLength: r, maxLength: r }));
const inputValue = fc.oneof(
  rows,
  rows.map((d) => d.flat()),
  rows.map((d) => ({ data: d })),
  rows.map((d) => ({ data: d.flat(), shape: [d.length, d[0]!.length] })),
  rows.map((d) => ({ data: d, datatype: 'FP32' })),
);

describe('fastJsonInputs over a scanned body', () => {
  it('gives the tensors JSON.parse body gives, and declines where that one declines', () => {
    let answered = 0;
    fc.assert(
      fc.property(fc.nat(FUNCTIONS.length - 1), inputValue, inputValue, fc.boolean(), (i, x, w, outputs) => {
        const f = FUNCTIONS[i]!;
        const body = JSON.stringify({ inputs: f.inputs.length > 1 ? { x, w } : { x }, ...(outputs ? { outputs: ['y'] } : {}) });
        const { value, numbers } = parseScanned(Buffer.from(body));
        const got = fastJsonInputs(f, value, numbers);
        const want = fastJsonInputs(f, JSON.parse(body));
        expect(got === undefined).toBe(want === undefined);
        if (!got || !want) return;
        answered++;
        expect(got.outputs).toEqual(want.outputs);
        expect(got.inputs.map((t) => [t.spec.name, t.shape, Buffer.from(t.bytes).toString('hex')])).toEqual(
          want.inputs.map((t) => [t.spec.name, t.shape, Buffer.from(t.bytes).toString('hex')]),
        );
      }),
      { numRuns: RUNS },
    );
    expect(answered).toBeGreaterThan(RUNS / 10);
  });
});
