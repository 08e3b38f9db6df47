// Load generator for the benchmarks: closed-loop clients at a set concurrency
// and an open-loop mode at a fixed arrival rate. Latencies go into an HDR
// histogram (hdr-histogram-js, pure-JS build) in microseconds.
//
// Threading: everything runs on the caller's event loop; `call` must be
// asynchronous (a network call, a worker message). Calls that throw count as
// errors and are not recorded as latencies.
import * as hdr from 'hdr-histogram-js';

/** What one measurement produced. Latencies in milliseconds. */
export interface LoadResult {
  /** Completed calls inside the measurement window. */
  requests: number;
  errors: number;
  /** Length of the measurement window in seconds. */
  seconds: number;
  /** Completed calls per second inside the window (times `itemsPerCall` when set). */
  throughput: number;
  p50: number;
  p95: number;
  p99: number;
  mean: number;
  max: number;
  /** First error message seen, if any. */
  firstError?: string;
}

/** `call(worker, seq)`: one request; `worker` is the client index (closed loop) or 0 (open loop). */
export type CallFn = (worker: number, seq: number) => Promise<unknown>;

export interface ClosedLoopOptions {
  concurrency: number;
  warmupMs: number;
  durationMs: number;
  call: CallFn;
  /** Units of work per call for the throughput figure (e.g. images per batch). Default 1. */
  itemsPerCall?: number;
}

export interface OpenLoopOptions {
  /** Arrivals per second, evenly spaced. */
  rate: number;
  warmupMs: number;
  durationMs: number;
  call: CallFn;
  /** Cap on calls in flight; arrivals over it still count from their scheduled time. Default 1024. */
  maxInFlight?: number;
}

/** An HDR histogram of microseconds (1 µs .. 60 s, 3 significant digits). */
export function newHistogram(): hdr.Histogram {
  return hdr.build({
    useWebAssembly: false,
    lowestDiscernibleValue: 1,
    highestTrackableValue: 60_000_000,
    numberOfSignificantValueDigits: 3,
    autoResize: true,
  });
}

/** Record one latency given in milliseconds. */
export function recordMs(h: hdr.Histogram, ms: number): void {
  h.recordValue(Math.max(1, Math.round(ms * 1000)));
}

const nowMs = (): number => performance.now();
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Summarize a histogram of µs into a LoadResult. */
export function summarize(h: hdr.Histogram, requests: number, errors: number, seconds: number, items = 1, firstError?: string): LoadResult {
  const ms = (us: number) => us / 1000;
  const empty = h.totalCount === 0;
  return {
    requests,
    errors,
    seconds,
    throughput: seconds > 0 ? (requests * items) / seconds : 0,
    p50: empty ? NaN : ms(h.getValueAtPercentile(50)),
    p95: empty ? NaN : ms(h.getValueAtPercentile(95)),
    p99: empty ? NaN : ms(h.getValueAtPercentile(99)),
    mean: empty ? NaN : ms(h.mean),
    max: empty ? NaN : ms(h.maxValue),
    firstError,
  };
}

/**
 * Closed loop: `concurrency` clients each send a call, wait for its answer,
 * send the next. The first `warmupMs` are not measured; every call that
 * completes inside the `durationMs` window after it is measured (latency from
 * its own start) and counted for throughput, so slow calls that straddle the
 * window's start still count: the window sees the steady state.
 */
export async function closedLoop(o: ClosedLoopOptions): Promise<LoadResult> {
  const h = newHistogram();
  const start = nowMs();
  const windowStart = start + o.warmupMs;
  // A window too short for calls this slow (a quick run on a loaded host: the
  // baseline's calls take longer than the whole window) is stretched until
  // every client has completed one call in it, up to SLOW_WINDOW_CAP_MS more;
  // throughput is then over the stretched window, so the rate stays honest.
  let windowEnd = windowStart + o.durationMs;
  const capEnd = windowEnd + SLOW_WINDOW_CAP_MS;
  let completed = 0;
  let errors = 0;
  let firstError: string | undefined;
  let seq = 0;
  const stretch = (t: number) => completed < o.concurrency && t < capEnd;
  const client = async (w: number) => {
    while (nowMs() < windowEnd || stretch(nowMs())) {
      const t0 = nowMs();
      try {
        await o.call(w, seq++);
        const t1 = nowMs();
        if (t1 > windowEnd && stretch(t1)) windowEnd = t1;
        if (t1 >= windowStart && t1 <= windowEnd) {
          completed++;
          recordMs(h, t1 - t0);
        }
      } catch (e) {
        if (nowMs() >= windowStart) errors++;
        firstError ??= (e as Error).message;
        if (errors > 50 && completed === 0) throw new Error(`every call fails: ${firstError}`);
      }
    }
  };
  await Promise.all(Array.from({ length: o.concurrency }, (_, w) => client(w)));
  return summarize(h, completed, errors, (windowEnd - windowStart) / 1000, o.itemsPerCall ?? 1, firstError);
}

/** How far a closed-loop window may stretch past its end for slow calls (ms). */
const SLOW_WINDOW_CAP_MS = 30_000;

/**
 * Open loop: calls are scheduled at a fixed rate whatever the answers do;
 * latency runs from each call's scheduled send time (not the moment it was
 * actually sent), so a stall is charged to every call it delayed instead of
 * being hidden (coordinated omission). Calls scheduled in the warm-up are not
 * measured; throughput counts measured calls completed by the window's end
 * plus a drain of at most 5 s.
 */
export async function openLoop(o: OpenLoopOptions): Promise<LoadResult> {
  const h = newHistogram();
  const interval = 1000 / o.rate;
  const maxInFlight = o.maxInFlight ?? 1024;
  const start = nowMs();
  const windowStart = start + o.warmupMs;
  const windowEnd = windowStart + o.durationMs;
  let inFlight = 0;
  let completed = 0;
  let errors = 0;
  let firstError: string | undefined;
  let i = 0;
  const pending: Array<() => void> = [];
  const done = new Set<Promise<void>>();
  const fire = (scheduled: number, n: number) => {
    const measured = scheduled >= windowStart;
    inFlight++;
    const p = (async () => {
      try {
        await o.call(0, n);
        if (measured) {
          completed++;
          recordMs(h, nowMs() - scheduled);
        }
      } catch (e) {
        if (measured) errors++;
        firstError ??= (e as Error).message;
      } finally {
        inFlight--;
        pending.shift()?.();
      }
    })();
    done.add(p);
    void p.then(() => done.delete(p));
  };
  for (;;) {
    const scheduled = start + i * interval;
    if (scheduled >= windowEnd) break;
    const wait = scheduled - nowMs();
    if (wait > 1) await sleep(wait - 0.5);
    else if (wait > 0) await new Promise<void>((r) => setImmediate(r));
    if (nowMs() < scheduled) continue;
    // Fire every arrival that is due (the loop may have been late).
    while (start + i * interval <= nowMs() && start + i * interval < windowEnd) {
      while (inFlight >= maxInFlight) await new Promise<void>((r) => pending.push(r));
      fire(start + i * interval, i);
      i++;
    }
  }
  await Promise.race([Promise.all(done), sleep(5000)]);
  return summarize(h, completed, errors, o.durationMs / 1000, 1, firstError);
}
