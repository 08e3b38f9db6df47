// Per model-version statistics (Triton's statistics extension). Owned by one
// model version; written by its scheduler on the main thread, read by the
// frontends and the metrics collector.
import { FAILURE_REASONS, type FailureReason, type StatsSink, type ExecutionTiming } from './scheduler.ts';
import type { Duration, ModelStatistics as Snapshot } from './server-api.ts';

const dur = (): Duration => ({ count: 0, ns: 0 });
const add = (d: Duration, ns: number, n = 1) => {
  d.count += n;
  d.ns += Math.max(0, Math.round(ns));
};

export class ModelStatistics implements StatsSink {
  private lastInference = 0;
  private inferenceCount = 0;
  private executionCount = 0;
  private readonly s = {
    success: dur(),
    fail: dur(),
    queue: dur(),
    compute_input: dur(),
    compute_infer: dur(),
    compute_output: dur(),
    cache_hit: dur(),
    cache_miss: dur(),
    cancel: dur(),
  };
  /** Failed requests by Triton's failure reason (the metric's `reason` label). */
  private readonly reasons = Object.fromEntries(FAILURE_REASONS.map((r) => [r, 0])) as Record<FailureReason, number>;
  private readonly batch = new Map<number, { compute_input: Duration; compute_infer: Duration; compute_output: Duration }>();

  constructor(
    readonly name: string,
    readonly version: string,
    private readonly memoryBytes: () => number = () => 0,
  ) {}

  queued(ns: number): void {
    add(this.s.queue, ns);
  }

  /** Time a request waited before its scheduler saw it (an on-demand load): queue time, not another queued request. */
  queueWait(ns: number): void {
    this.s.queue.ns += Math.max(0, Math.round(ns));
  }

  executed(batchSize: number, requestCount: number, t: ExecutionTiming, paddedBatchSize = batchSize): void {
    this.executionCount++;
    this.inferenceCount += batchSize;
    // Triton charges each request of a batch the batch's compute time.
    add(this.s.compute_input, t.computeInputNs * requestCount, requestCount);
    add(this.s.compute_infer, t.computeInferNs * requestCount, requestCount);
    add(this.s.compute_output, t.computeOutputNs * requestCount, requestCount);
    let b = this.batch.get(paddedBatchSize);
    if (!b) this.batch.set(paddedBatchSize, (b = { compute_input: dur(), compute_infer: dur(), compute_output: dur() }));
    add(b.compute_input, t.computeInputNs);
    add(b.compute_infer, t.computeInferNs);
    add(b.compute_output, t.computeOutputNs);
  }

  /** A response served from the response cache; `ns` is the lookup time. */
  cacheHit(ns: number): void {
    add(this.s.cache_hit, ns);
  }

  /** A response not in the cache; `ns` is the lookup plus insert time. */
  cacheMiss(ns: number): void {
    add(this.s.cache_miss, ns);
  }

  succeeded(ns: number): void {
    add(this.s.success, ns);
    this.lastInference = Date.now();
  }

  failed(ns: number, reason: FailureReason = 'OTHER'): void {
    add(this.s.fail, ns);
    this.reasons[reason]++;
    this.lastInference = Date.now();
  }

  /** Failed requests by reason; they add up to the `fail` count. */
  failureReasons(): Record<FailureReason, number> {
    return { ...this.reasons };
  }

  /**
   * A request its client abandoned (stream closed, call cancelled): counted
   * here besides its success or failure, whether it was dropped from the
   * queue or stopped while it ran.
   */
  cancelled(ns: number): void {
    add(this.s.cancel, ns);
  }

  snapshot(): Snapshot {
    const copy = (d: Duration) => ({ ...d });
    return {
      name: this.name,
      version: this.version,
      last_inference: this.lastInference,
      inference_count: this.inferenceCount,
      execution_count: this.executionCount,
      inference_stats: Object.fromEntries(Object.entries(this.s).map(([k, v]) => [k, copy(v)])) as Snapshot['inference_stats'],
      batch_stats: [...this.batch.entries()]
        .sort((a, b) => a[0] - b[0])
        .map(([batch_size, b]) => ({
          batch_size,
          compute_input: copy(b.compute_input),
          compute_infer: copy(b.compute_infer),
          compute_output: copy(b.compute_output),
        })),
      memory_usage: this.memoryBytes() ? [{ type: 'CPU', id: 0, byte_size: this.memoryBytes() }] : [],
    };
  }
}
