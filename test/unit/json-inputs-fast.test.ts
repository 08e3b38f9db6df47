// json-inputs-fast.ts against payload-codec.ts's jsonInputs: wherever the fast
// plan answers, it must give the same tensors (shape and bytes) as the
// general path; where the general path refuses a body, the fast plan must not
// answer. Thousands of generated bodies around the edges (shapes, wildcards,
// datatypes, integer ranges, ragged and odd values), plus the plan being
// compiled once per resolved function.
import { describe, expect, it } from 'vitest';
import type { ResolvedFunction, TensorSpec } from '../../gateway/calls/function-registry.ts';
import { fastJsonInputs } from '../../gateway/calls/json-inputs-fast.ts';
import { jsonInputs } from '../../gateway/calls/payload-codec.ts';
import type { FunctionDefinition } from '../../gateway/calls/function-schema.ts';

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

/** A deterministic generator (mulberry32). */
function rng(seed: number): () => number {
  return () => {
    seed |= 0;
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const FUNCTIONS = [
  fn([{ name: 'x', datatype: 'FP32', shape: [-1, 4] }]),
  fn([{ name: 'x', datatype: 'FP32', shape: [2, 3] }]),
  fn([
    { name: 'x', datatype: 'INT32', shape: [-1] },
    { name: 'w', datatype: 'FP64', shape: [-1, -1] },
  ]),
  fn([{ name: 'x', datatype: 'UINT8', shape: [-1, 2] }]),
  fn([{ name: 'x', datatype: 'INT8', shape: [3] }]),
  fn([{ name: 'x', datatype: 'BOOL', shape: [-1] }]),
];

function value(r: () => number): unknown {
  const pick = <T>(xs: T[]) => xs[Math.floor(r() * xs.length)]!;
  const scalar = () =>
    pick<unknown>([
      0,
      1,
      -1,
      2.5,
      127,
      128,
      -129,
      255,
      256,
      2 ** 31,
      -(2 ** 31) - 1,
      1e30,
      0.1,
      r() * 10,
      Math.floor(r() * 300) - 20,
      'a',
      true,
      null,
      [],
      {},
    ]);
  const dims = Array.from({ length: Math.floor(r() * 3) + 1 }, () => Math.floor(r() * 4) + (r() < 0.1 ? 0 : 1));
  const build = (d: number[]): unknown => {
    if (!d.length) return r() < 0.97 ? Math.floor(r() * 200) - 50 + (r() < 0.3 ? 0.5 : 0) : scalar();
    const n = r() < 0.05 ? d[0]! + 1 : d[0]!;
    return Array.from({ length: n }, () => build(d.slice(1)));
  };
  const data = build(dims);
  switch (pick([0, 0, 1, 2, 3, 4])) {
    case 0:
      return data;
    case 1:
      return { data };
    case 2:
      return { data, shape: r() < 0.5 ? dims : [...dims].reverse() };
    case 3:
      return { data, datatype: pick(['FP32', 'INT32', 'UINT8', 'FP64', 'INT8']) };
    default:
      return { data, shape: dims, extra: 1 };
  }
}

function body(f: ResolvedFunction, r: () => number): unknown {
  const inputs: Record<string, unknown> = {};
  for (const s of f.inputs) if (r() > 0.05) inputs[s.name] = value(r);
  if (r() < 0.05) inputs.other = [1];
  const b: Record<string, unknown> = { inputs };
  if (r() < 0.1) b.outputs = r() < 0.8 ? ['y'] : [1];
  if (r() < 0.03) b.more = true;
  return b;
}

function general(f: ResolvedFunction, b: unknown) {
  try {
    return jsonInputs(f, b);
  } catch {
    return undefined;
  }
}

describe('fastJsonInputs', () => {
  it('answers only where jsonInputs succeeds, with the same tensors', () => {
    const r = rng(25);
    let fast = 0;
    for (let i = 0; i < 20_000; i++) {
      const f = FUNCTIONS[i % FUNCTIONS.length]!;
      const b = body(f, r);
      const got = fastJsonInputs(f, b);
      if (!got) continue;
      fast++;
      const want = general(f, b);
      expect(want, JSON.stringify(b)).toBeDefined();
      expect(got.outputs).toEqual(want!.outputs);
      expect(got.inputs.map((t) => [t.spec.name, t.shape, [...t.bytes]])).toEqual(
        want!.inputs.map((t) => [t.spec.name, t.shape, [...t.bytes]]),
      );
    }
    expect(fast).toBeGreaterThan(500); // the generator does reach the fast path (973 of 20,000 with this seed)
  });

  it('takes the common bodies: nested rows, data + shape, flat data', () => {
    const f = FUNCTIONS[0]!;
    for (const v of [[[1, 2, 3, 4]], { data: [1, 2, 3, 4, 5, 6, 7, 8], shape: [2, 4] }, { data: [1, 2, 3, 4] }]) {
      const got = fastJsonInputs(f, { inputs: { x: v } });
      expect(got).toBeDefined();
      expect(got!.inputs[0]!.bytes).toEqual(general(f, { inputs: { x: v } })!.inputs[0]!.bytes);
    }
  });

  it('leaves BOOL, b64 and __proto__ bodies to the general path', () => {
    expect(fastJsonInputs(FUNCTIONS[5]!, { inputs: { x: [true, false] } })).toBeUndefined();
    expect(fastJsonInputs(FUNCTIONS[3]!, { inputs: { x: { b64: 'AAA=' } } })).toBeUndefined();
    expect(fastJsonInputs(FUNCTIONS[0]!, JSON.parse('{"inputs":{"__proto__":[1],"x":[[1,2,3,4]]}}'))).toBeUndefined();
  });
});
