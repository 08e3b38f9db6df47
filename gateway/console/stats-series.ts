// Pure helpers behind the console's live charts: cumulative counters (the
// engine's Triton statistics, the gateway's Prometheus histogram and byte
// counters) sampled twice become one chart point of rates and means over the
// interval between the samples. Percentiles come from histogram bucket
// deltas, interpolated inside the bucket as Prometheus' histogram_quantile
// does. No clocks, no I/O: the sampler passes the snapshots in.

/** Cumulative engine statistics of one model (Triton's ModelStatistics, summed over versions). */
export interface ModelCounters {
  inferences: number;
  executions: number;
  successCount: number;
  successNs: number;
  queueCount: number;
  queueNs: number;
}

/** Cumulative latency histogram of one function: [upper bound in seconds, cumulative count], +Inf last. */
export interface FunctionCounters {
  buckets: Array<[number, number]>;
}

/** Everything sampled at one instant. */
export interface Snapshot {
  /** Unix time of the sample (ms). */
  at: number;
  models: Record<string, ModelCounters>;
  functions: Record<string, FunctionCounters>;
  /** Bytes the gateway moved to/from the engine, both directions. */
  bytes: { staged: number; inline: number };
}

export interface ModelPoint {
  /** Inferences per second (a batch of 4 counts 4). */
  rps: number;
  /** Mean request time in the engine (ms); null when no request finished in the interval. */
  latencyMs: number | null;
  /** Mean time queued before execution (ms). */
  queueMs: number | null;
  /** Mean batch size: inferences per execution. */
  batch: number | null;
}

export interface FunctionPoint {
  rps: number;
  p50Ms: number | null;
  p95Ms: number | null;
}

/** One chart point: rates and means over (prev.at, cur.at]. */
export interface SeriesPoint {
  /** Unix time in seconds (uPlot's x unit). */
  t: number;
  models: Record<string, ModelPoint>;
  functions: Record<string, FunctionPoint>;
  bytes: { stagedPerS: number; inlinePerS: number };
}

/** Counter delta; a counter that went backwards (engine or gateway restarted) counts from zero. */
export function counterDelta(prev: number | undefined, cur: number): number {
  if (prev === undefined || cur < prev) return cur;
  return cur - prev;
}

const perSecond = (delta: number, seconds: number) => (seconds > 0 ? delta / seconds : 0);
const mean = (sum: number, count: number) => (count > 0 ? sum / count : null);

/**
 * The q-quantile (0..1) of the observations in a cumulative bucket list,
 * interpolated linearly inside the bucket holding it; null when empty. A
 * quantile in the +Inf bucket is reported as the largest finite bound.
 */
export function histogramQuantile(q: number, buckets: Array<[number, number]>): number | null {
  if (!buckets.length) return null;
  const total = buckets[buckets.length - 1]![1];
  if (total <= 0) return null;
  const rank = q * total;
  let lowerBound = 0;
  let lowerCount = 0;
  for (const [le, cum] of buckets) {
    if (cum >= rank && cum > lowerCount) {
      if (!Number.isFinite(le)) return lowerBound;
      return lowerBound + ((le - lowerBound) * (rank - lowerCount)) / (cum - lowerCount);
    }
    if (Number.isFinite(le)) lowerBound = le;
    lowerCount = cum;
  }
  return lowerBound;
}

/** Bucket-by-bucket delta of two cumulative histograms with the same bounds. */
export function bucketDelta(prev: Array<[number, number]> | undefined, cur: Array<[number, number]>): Array<[number, number]> {
  const before = new Map(prev ?? []);
  const reset = prev !== undefined && cur.some(([le, c]) => c < (before.get(le) ?? 0));
  return cur.map(([le, c]) => [le, reset ? c : c - (before.get(le) ?? 0)]);
}

/** The chart point for the interval between two snapshots. */
export function derivePoint(prev: Snapshot, cur: Snapshot): SeriesPoint {
  const dt = (cur.at - prev.at) / 1000;
  const models: Record<string, ModelPoint> = {};
  for (const [name, c] of Object.entries(cur.models)) {
    const p = prev.models[name];
    const inferences = counterDelta(p?.inferences, c.inferences);
    const executions = counterDelta(p?.executions, c.executions);
    models[name] = {
      rps: perSecond(inferences, dt),
      latencyMs: nsMean(counterDelta(p?.successNs, c.successNs), counterDelta(p?.successCount, c.successCount)),
      queueMs: nsMean(counterDelta(p?.queueNs, c.queueNs), counterDelta(p?.queueCount, c.queueCount)),
      batch: mean(inferences, executions),
    };
  }
  const functions: Record<string, FunctionPoint> = {};
  for (const [name, f] of Object.entries(cur.functions)) {
    const d = bucketDelta(prev.functions[name]?.buckets, f.buckets);
    const count = d.length ? d[d.length - 1]![1] : 0;
    const ms = (q: number) => {
      const s = histogramQuantile(q, d);
      return s === null ? null : s * 1000;
    };
    functions[name] = { rps: perSecond(count, dt), p50Ms: ms(0.5), p95Ms: ms(0.95) };
  }
  return {
    t: cur.at / 1000,
    models,
    functions,
    bytes: {
      stagedPerS: perSecond(counterDelta(prev.bytes.staged, cur.bytes.staged), dt),
      inlinePerS: perSecond(counterDelta(prev.bytes.inline, cur.bytes.inline), dt),
    },
  };
}

function nsMean(ns: number, count: number): number | null {
  const m = mean(ns, count);
  return m === null ? null : m / 1e6;
}

/** Sum Triton statistics rows (one per version) into counters per model name. */
export function modelCounters(rows: Array<Record<string, unknown>>): Record<string, ModelCounters> {
  const out: Record<string, ModelCounters> = {};
  const n = (v: unknown) => Number(v ?? 0) || 0;
  for (const r of rows) {
    const s = (r.inference_stats ?? {}) as Record<string, { count?: unknown; ns?: unknown } | undefined>;
    const acc = (out[String(r.name)] ??= { inferences: 0, executions: 0, successCount: 0, successNs: 0, queueCount: 0, queueNs: 0 });
    acc.inferences += n(r.inference_count);
    acc.executions += n(r.execution_count);
    acc.successCount += n(s.success?.count);
    acc.successNs += n(s.success?.ns);
    acc.queueCount += n(s.queue?.count);
    acc.queueNs += n(s.queue?.ns);
  }
  return out;
}
