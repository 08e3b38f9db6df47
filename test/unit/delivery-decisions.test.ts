// The pure decisions of progressive delivery: which side a call takes
// (pin, sticky id, exact counter), latency buckets and quantiles, the gate
// judgement of a step, and the shadow's output difference.
import { describe, expect, it } from 'vitest';
import { bucketOf, chooseSide, pinnedSide, SplitCounter } from '../../gateway/delivery/traffic-split.ts';
import { bucketIndex, judgeStep, LATENCY_BUCKETS_MS, quantileMs } from '../../gateway/delivery/gate-analysis.ts';
import { RolloutRequestSchema } from '../../gateway/delivery/rollout-spec.ts';
import { diffTensor } from '../../gateway/delivery/shadow-call.ts';

const spec = RolloutRequestSchema.parse({
  function: 'f',
  next: { target: { model: 'b' } },
  steps: [
    { share: 5, holdMs: 1000 },
    { share: 100, holdMs: 1000 },
  ],
  gates: { minCalls: 10, maxErrorRate: 0.1, maxP95Ratio: 1.5 },
});
const side = (calls: number, errors: number, p95Ms: number) => ({ calls, errors, p95Ms });

describe('traffic split', () => {
  it('the counter is exact after every call: floor(n × share) canaries', () => {
    for (const share of [0.5, 5, 20, 33.3, 50, 99]) {
      const c = new SplitCounter(share);
      let canary = 0;
      for (let n = 1; n <= 5000; n++) {
        if (c.next() === 'canary') canary++;
        expect(Math.abs(canary - (n * share) / 100)).toBeLessThan(1);
      }
    }
  });

  it('a client id takes the same side every time, and about share % of ids take the canary', () => {
    const c = new SplitCounter(10);
    const ids = Array.from({ length: 20_000 }, (_, i) => `id-${i}-${(i * 2654435761) >>> 0}`);
    const first = ids.map((id) => chooseSide(10, 'ro-1', undefined, id, c));
    expect(ids.map((id) => chooseSide(10, 'ro-1', undefined, id, c))).toEqual(first);
    const share = first.filter((s) => s === 'canary').length / ids.length;
    expect(Math.abs(share - 0.1)).toBeLessThan(0.01);
    // Another rollout reshuffles which ids are canaries.
    const other = ids.map((id) => chooseSide(10, 'ro-2', undefined, id, c));
    expect(other).not.toEqual(first);
  });

  it('pins win; 0 and 100 are absolute; bad pins are ignored', () => {
    const c = new SplitCounter(50);
    expect(chooseSide(0, 'r', 'canary', 'x', c)).toBe('canary');
    expect(chooseSide(100, 'r', 'stable', undefined, c)).toBe('stable');
    expect(chooseSide(0, 'r', undefined, 'x', c)).toBe('stable');
    expect(chooseSide(100, 'r', undefined, 'x', c)).toBe('canary');
    expect(pinnedSide(' Canary ')).toBe('canary');
    expect(pinnedSide('blue')).toBeUndefined();
    expect(bucketOf('r', 'x')).toBeLessThan(10_000);
  });
});

describe('latency buckets', () => {
  it('each latency lands in the first bucket whose bound holds it', () => {
    for (const ms of [0.01, 0.05, 0.051, 1, 7.3, 250, 5000, 1e9]) {
      const i = bucketIndex(ms);
      expect(ms).toBeLessThanOrEqual(LATENCY_BUCKETS_MS[i]!);
      if (i > 0) expect(ms).toBeGreaterThan(LATENCY_BUCKETS_MS[i - 1]!);
    }
  });

  it('p95 of merged counts is within one bucket of the exact p95', () => {
    const xs = Array.from({ length: 1000 }, (_, i) => 1 + (i % 100) * 0.5);
    const counts = new Map<number, number>();
    for (const x of xs) counts.set(bucketIndex(x), (counts.get(bucketIndex(x)) ?? 0) + 1);
    const exact = [...xs].sort((a, b) => a - b)[949]!;
    const p95 = quantileMs(counts, 0.95);
    expect(p95).toBeGreaterThanOrEqual(exact);
    expect(p95).toBeLessThanOrEqual(exact * 1.125 + 1e-9);
    expect(quantileMs(new Map(), 0.95)).toBe(0);
  });
});

describe('gate judgement', () => {
  it('holds until the hold time, then waits for minCalls on each side', () => {
    expect(judgeStep(spec, 0, 0, 500, side(50, 0, 1), side(50, 0, 1)).action).toBe('hold');
    const w = judgeStep(spec, 0, 0, 2000, side(50, 0, 1), side(3, 0, 1));
    expect(w).toMatchObject({ action: 'hold', reason: expect.stringContaining('waiting for 10 calls') });
  });

  it('rolls back at once (inside the hold) on the error rate or the p95 ratio', () => {
    const e = judgeStep(spec, 0, 0, 10, side(100, 0, 1), side(10, 2, 1));
    expect(e).toMatchObject({ action: 'rollback', reason: expect.stringMatching(/^error rate 20\.00 %/) });
    const p = judgeStep(spec, 0, 0, 10, side(100, 0, 10), side(10, 0, 16));
    expect(p).toMatchObject({ action: 'rollback', reason: expect.stringMatching(/^p95 16 ms is 1\.60× stable's 10 ms/) });
    expect(judgeStep(spec, 0, 0, 10, side(100, 0, 10), side(10, 0, 15)).action).toBe('hold');
  });

  it('advances a passing step after its hold; the last step completes', () => {
    expect(judgeStep(spec, 0, 0, 1000, side(100, 0, 10), side(10, 1, 12)).action).toBe('advance');
    expect(judgeStep(spec, 1, 0, 1000, side(100, 0, 10), side(10, 0, 12)).action).toBe('complete');
  });
});

describe('rollout requests', () => {
  it.each([
    [{ steps: [{ share: -1 }] }, 'share must be between 0 and 100'],
    [{ steps: [{ share: 101 }] }, 'share must be between 0 and 100'],
    [{ steps: [{ share: 100 }] }, 'first step must leave calls on stable'],
    [{ steps: [{ share: 50 }, { share: 10 }] }, 'must not decrease'],
    [{ gates: { maxP95Ratio: 2 } }, 'minCalls'],
    [{ next: undefined, steps: undefined, gates: undefined }, 'needs a next target'],
  ])('refuses %j', (patch, says) => {
    const r = RolloutRequestSchema.safeParse({
      function: 'f',
      next: { target: { model: 'b' } },
      steps: [{ share: 5 }],
      gates: { minCalls: 1 },
      ...patch,
    });
    expect(r.success).toBe(false);
    expect(JSON.stringify(r.error!.issues)).toContain(says);
  });
});

describe('shadow difference', () => {
  const f32 = (xs: number[]) => new Uint8Array(new Float32Array(xs).buffer);
  it('is the largest element difference, and a mismatch when sizes or bytes differ', () => {
    expect(diffTensor('FP32', f32([1, 2, 3]), f32([1, 2.5, 2]))).toEqual({ maxAbsDiff: 1, mismatch: false });
    expect(diffTensor('FP32', f32([1, 2]), f32([1, 2, 3])).mismatch).toBe(true);
    expect(diffTensor('FP32', f32([1]), f32([NaN])).maxAbsDiff).toBe(Infinity);
    expect(diffTensor('BYTES', new Uint8Array([1, 2]), new Uint8Array([1, 3])).mismatch).toBe(true);
  });
});
