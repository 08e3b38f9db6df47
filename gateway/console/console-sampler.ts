// Samples the engine's statistics and the gateway's metrics every few
// seconds while someone watches the console, and keeps the last N chart
// points (derived by stats-series.ts). Sampling starts on the first look and
// stops after idleStopMs without one, so an unwatched gateway does no work.
//
// Ownership: owns its timer and the ring of points. Event loop only; a slow
// sample never overlaps the next (the tick is skipped).
import type { GatewayMetrics } from '../core/metrics.ts';
import { derivePoint, modelCounters, type FunctionCounters, type SeriesPoint, type Snapshot } from './stats-series.ts';

export interface SamplerOptions {
  intervalMs?: number;
  /** Points kept (default 90: three minutes at 2 s). */
  keep?: number;
  /** Stop sampling this long after the last look (ms). */
  idleStopMs?: number;
  now?: () => number;
}

export class ConsoleSampler {
  readonly intervalMs: number;
  /** Points kept: the charts' window is keep × intervalMs. */
  readonly keep: number;
  private readonly idleStopMs: number;
  private readonly now: () => number;
  private readonly points: SeriesPoint[] = [];
  private last: Snapshot | undefined;
  private timer: NodeJS.Timeout | undefined;
  private busy = false;
  private lastLook = 0;

  constructor(
    private readonly source: () => Promise<Snapshot>,
    o: SamplerOptions = {},
  ) {
    this.intervalMs = o.intervalMs ?? 2000;
    this.keep = o.keep ?? 90;
    this.idleStopMs = o.idleStopMs ?? 60_000;
    this.now = o.now ?? Date.now;
  }

  /** Someone is watching: make sure sampling runs. Returns the points so far. */
  look(): SeriesPoint[] {
    this.lastLook = this.now();
    if (!this.timer) {
      void this.sample();
      this.timer = setInterval(() => {
        if (this.now() - this.lastLook > this.idleStopMs) return this.stop();
        void this.sample();
      }, this.intervalMs);
      this.timer.unref();
    }
    return [...this.points];
  }

  /** Take one sample now; adds a point when there is an earlier sample. */
  async sample(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      const cur = await this.source();
      if (this.last && cur.at > this.last.at) {
        this.points.push(derivePoint(this.last, cur));
        if (this.points.length > this.keep) this.points.splice(0, this.points.length - this.keep);
      }
      this.last = cur;
    } catch {
      // Engine away: leave a gap (the overview says why); the next sample starts afresh.
      this.last = undefined;
    } finally {
      this.busy = false;
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}

/** What a snapshot is read from. */
export interface SnapshotSources {
  modelStatistics(): Promise<Array<Record<string, unknown>>>;
  metrics?: GatewayMetrics;
  now?: () => number;
}

/** Read one Snapshot: engine statistics plus the gateway's latency histogram and byte counters. */
export async function readSnapshot(s: SnapshotSources): Promise<Snapshot> {
  const rows = await s.modelStatistics();
  const at = (s.now ?? Date.now)();
  const functions: Record<string, FunctionCounters> = {};
  const bytes = { staged: 0, inline: 0 };
  if (s.metrics) {
    const perFn = new Map<string, Map<number, number>>();
    for (const v of (await s.metrics.latency.get()).values) {
      if (!v.metricName?.endsWith('_bucket')) continue;
      const labels = v.labels as Record<string, string | number | undefined>;
      const fn = String(labels.function);
      const le = labels.le === '+Inf' ? Infinity : Number(labels.le);
      const m = perFn.get(fn) ?? new Map<number, number>();
      m.set(le, (m.get(le) ?? 0) + v.value); // summed over the transfer label
      perFn.set(fn, m);
    }
    for (const [fn, m] of perFn) functions[fn] = { buckets: [...m].sort((a, b) => a[0] - b[0]) };
    for (const v of (await s.metrics.stagedBytes.get()).values) bytes.staged += v.value;
    for (const v of (await s.metrics.inlineBytes.get()).values) bytes.inline += v.value;
  }
  return { at, models: modelCounters(rows), functions, bytes };
}
