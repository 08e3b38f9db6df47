// The gates of a canary step as one pure function: from the step's numbers
// on both sides (summed over every gateway), the step's start and the clock,
// decide whether to hold, move to the next step, finish the rollout, or roll
// back — and say why in words the deploy history keeps.
//
// Latencies are summed across gateways as counts in fixed log-spaced
// buckets (LATENCY_BUCKETS_MS), so a p95 over several gateways is the p95 of
// all their calls, within one bucket's width (about 12 %).
import type { RolloutRequest, SideNumbers } from './rollout-spec.ts';

/** Upper bounds (ms) of the latency buckets: 0.05 ms to ~110 s in steps of 12.5 %, then +Inf. */
export const LATENCY_BUCKETS_MS: readonly number[] = (() => {
  const b: number[] = [];
  for (let v = 0.05; v < 120_000; v *= 1.125) b.push(Number(v.toPrecision(4)));
  b.push(Infinity);
  return b;
})();

/** Index of the bucket a latency falls in. */
export function bucketIndex(ms: number): number {
  let lo = 0;
  let hi = LATENCY_BUCKETS_MS.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (ms <= LATENCY_BUCKETS_MS[mid]!) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** The q-quantile (0-1) of bucket counts, as the upper bound of its bucket (the last finite bound for +Inf). */
export function quantileMs(counts: ReadonlyMap<number, number>, q: number): number {
  let total = 0;
  for (const c of counts.values()) total += c;
  if (total === 0) return 0;
  const rank = Math.ceil(q * total);
  let seen = 0;
  for (const i of [...counts.keys()].sort((a, b) => a - b)) {
    seen += counts.get(i)!;
    if (seen >= rank) return Math.min(LATENCY_BUCKETS_MS[i]!, LATENCY_BUCKETS_MS[LATENCY_BUCKETS_MS.length - 2]!);
  }
  return 0;
}

export type GateDecision =
  | { action: 'hold'; reason: string }
  | { action: 'advance'; reason: string }
  | { action: 'complete'; reason: string }
  | { action: 'rollback'; reason: string };

/**
 * Judge one step. A failing gate rolls back as soon as each side has
 * minCalls calls (it never waits out the hold); a passing step moves on only
 * after its hold time, and the last step (share 100) completes the rollout.
 */
export function judgeStep(
  spec: RolloutRequest,
  step: number,
  startedAt: number,
  now: number,
  stable: SideNumbers,
  canary: SideNumbers,
): GateDecision {
  const gates = spec.gates!;
  const steps = spec.steps!;
  const { share, holdMs } = steps[step]!;
  const last = step === steps.length - 1;
  // A 100 % step sends no call to stable: the previous steps' stable side is the reference (the caller passes it).
  const enough = canary.calls >= gates.minCalls && stable.calls >= gates.minCalls;
  if (enough) {
    const rate = canary.errors / canary.calls;
    if (rate > gates.maxErrorRate) {
      return { action: 'rollback', reason: `error rate ${pct(rate)} over ${canary.calls} canary calls exceeds ${pct(gates.maxErrorRate)}` };
    }
    if (stable.p95Ms > 0 && canary.p95Ms > gates.maxP95Ratio * stable.p95Ms) {
      return {
        action: 'rollback',
        reason: `p95 ${fmt(canary.p95Ms)} ms is ${(canary.p95Ms / stable.p95Ms).toFixed(2)}× stable's ${fmt(stable.p95Ms)} ms (limit ${gates.maxP95Ratio}×)`,
      };
    }
  }
  if (now - startedAt < holdMs) return { action: 'hold', reason: `holding ${share} % until ${holdMs} ms have passed` };
  if (!enough)
    return { action: 'hold', reason: `waiting for ${gates.minCalls} calls on each side (stable ${stable.calls}, canary ${canary.calls})` };
  const verdict = `gates passed: error rate ${pct(canary.errors / canary.calls)}, p95 ${fmt(canary.p95Ms)} ms vs stable ${fmt(stable.p95Ms)} ms over ${canary.calls} canary calls`;
  return last ? { action: 'complete', reason: verdict } : { action: 'advance', reason: verdict };
}

const pct = (x: number) => `${(x * 100).toFixed(2)} %`;
const fmt = (x: number) => (x >= 10 ? x.toFixed(0) : x.toFixed(2));
