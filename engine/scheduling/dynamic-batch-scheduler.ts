// Triton's dynamic batcher for one model: requests wait in a SchedulerQueue
// (priority levels, queue policies) and leave it in batches chosen by
// decideBatch whenever an instance of the model's InstancePool is free, so
// batches grow while every instance is busy. Runs on the caller's thread:
// all state changes happen in schedule(), which timers, enqueues, aborts and
// finished executions call; execute() calls run concurrently, one per instance.
// With batching off (a model without dynamic_batching: Triton's default
// scheduler) every request leaves alone, FIFO, with no delay. In-flight
// count, stop-and-drain, the timer and answering are the SchedulerCore's.
import { batchShapeKey, decideBatch, type BatchPolicy, type PendingItem } from './dynamic-batch-decision.ts';
import { finalOutcomes, runOnInstance } from './instance-run.ts';
import type { InferRequest, InferResponse } from '../api/infer-request.ts';
import type { InstancePool } from './instance-pool.ts';
import type { ModelConfig } from '../api/model-config.ts';
import type { ExecutionInstance, Scheduler, StatsSink } from '../api/scheduler.ts';
import { rejection, requestBatchSize } from '../api/scheduler.ts';
import { SchedulerQueue, type Clock, type QueueEntry } from './scheduler-queue.ts';
import { OneShotTimer, SchedulerCore } from './scheduler-core.ts';
import { cancelled, invalidArg, StatusError, unavailable } from '../api/status.ts';
import { tracer } from '../../common/logger.ts';

export type { Clock } from './scheduler-queue.ts';

const trace = tracer('batcher');

export interface DynamicBatchSchedulerOptions {
  modelName: string;
  /** Normalized config with max_batch_size and dynamic_batching. */
  config: ModelConfig;
  pool: InstancePool;
  stats: StatsSink;
  clock?: Clock;
  /** Form batches (default: when the config has dynamic_batching and max_batch_size > 0). */
  batching?: boolean;
  /**
   * Test hook, Triton's TRITONSERVER_DELAY_SCHEDULER: hold every request
   * until this many are queued, then schedule as usual from then on (default:
   * that environment variable, else no hold). Lets a test make the batches it
   * means to, whatever the machine's speed.
   */
  delayUntilQueued?: number;
}

/** TRITONSERVER_DELAY_SCHEDULER as a count (0: unset or not a positive integer). */
export function delaySchedulerFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const n = Number(env.TRITONSERVER_DELAY_SCHEDULER ?? '');
  return Number.isSafeInteger(n) && n > 0 ? n : 0;
}

interface Pending {
  request: InferRequest;
  resolve: (r: InferResponse) => void;
  reject: (e: StatusError) => void;
  batchSize: number;
  /** What decideBatch reads of it (batch size, shape key, enqueue time), made once at enqueue. */
  decision: PendingItem;
  /** Accept order, for preserve_ordering. */
  seq: number;
  entry?: QueueEntry<Pending>;
  onAbort?: () => void;
}

export class DynamicBatchScheduler implements Scheduler {
  private readonly modelName: string;
  private readonly pool: InstancePool;
  private readonly stats: StatsSink;
  private readonly core: SchedulerCore;
  private readonly timer: OneShotTimer;
  private readonly maxBatchSize: number;
  private readonly policy: BatchPolicy;
  private readonly preserveOrdering: boolean;
  private readonly ragged: Set<string>;
  private readonly queue: SchedulerQueue<Pending>;
  private readonly batching: boolean;

  /** An instance acquired for the next batch, kept while that batch waits to fill. */
  private held: ExecutionInstance | undefined;
  private acquiring = false;
  private scheduling = false;
  private rerun = false;
  /** preserve_ordering: next accept number to deliver, and settled ones waiting for it. */
  private nextSeq = 0;
  private nextToDeliver = 0;
  private readonly settled = new Map<number, () => void>();
  /** Requests still to queue before the first is scheduled (the delay hook); 0 once released. */
  private holdUntil: number;

  constructor(opts: DynamicBatchSchedulerOptions) {
    this.holdUntil = opts.delayUntilQueued ?? delaySchedulerFromEnv();
    this.batching = opts.batching ?? (!!opts.config.dynamic_batching && opts.config.max_batch_size > 0);
    // Without batching the dynamic_batching block (queue policies, priorities) does not apply, as before.
    const db = (this.batching ? opts.config.dynamic_batching : undefined) ?? {};
    this.modelName = opts.modelName;
    this.pool = opts.pool;
    this.stats = opts.stats;
    this.core = new SchedulerCore({ refusal: `model '${opts.modelName}' is not accepting requests`, stats: opts.stats, clock: opts.clock });
    this.timer = new OneShotTimer(this.core.clock, () => this.schedule());
    this.maxBatchSize = opts.config.max_batch_size;
    this.policy = {
      maxBatchSize: this.maxBatchSize,
      preferredSizes: db.preferred_batch_size ?? [],
      maxQueueDelayNs: BigInt(Math.round(db.max_queue_delay_microseconds ?? 0)) * 1000n,
    };
    this.preserveOrdering = db.preserve_ordering ?? false;
    this.ragged = new Set((opts.config.input ?? []).filter((i) => i.allow_ragged_batch).map((i) => i.name));
    this.queue = new SchedulerQueue<Pending>(opts.modelName, db);
  }

  enqueue(request: InferRequest): Promise<InferResponse> {
    const refused = this.core.refused();
    if (refused) return Promise.reject(refused);
    if (request.signal?.aborted) return Promise.reject(cancelled(`request for model '${this.modelName}' was cancelled`));
    const batchSize = requestBatchSize(request, this.maxBatchSize);
    if (this.batching && this.maxBatchSize > 0 && (batchSize < 1 || batchSize > this.maxBatchSize)) {
      return Promise.reject(
        invalidArg(`inference request batch-size must be between 1 and ${this.maxBatchSize} for '${this.modelName}', got ${batchSize}`),
      );
    }
    const now = this.core.clock.nowNs();
    request.arrivalNs ??= now;
    return new Promise<InferResponse>((resolve, reject) => {
      const p: Pending = {
        request,
        resolve,
        reject,
        batchSize,
        decision: { batchSize, shapeKey: batchShapeKey(request, this.maxBatchSize, this.ragged), enqueuedNs: now },
        seq: -1,
      };
      try {
        p.entry = this.queue.enqueue(p, request.priority, request.timeoutUs, now);
      } catch (err) {
        // Bad priority or queue full: never accepted. A full queue is Triton's REJECTED failure.
        const e = err as StatusError;
        if (e.code === 'UNAVAILABLE') this.stats.failed(0, 'REJECTED');
        reject(e);
        return;
      }
      p.seq = this.nextSeq++;
      this.core.accept();
      if (request.signal) {
        p.onAbort = () => this.cancel(p);
        request.signal.addEventListener('abort', p.onAbort, { once: true });
      }
      this.schedule();
    });
  }

  inflightCount(): number {
    return this.core.inflight;
  }

  stop(): Promise<void> {
    const drained = this.core.stop();
    this.schedule(); // queued requests go out without waiting for the delay
    return drained;
  }

  private cancel(p: Pending): void {
    if (!p.entry || !this.queue.remove(p.entry)) return; // already executing
    trace(`model '${this.modelName}' request cancelled while queued`, p.request.id);
    this.settle(p, cancelled(`request for model '${this.modelName}' was cancelled`), false);
    this.schedule();
  }

  /** Expire timeouts, send every batch that is due to a free instance, and arm the timer. */
  private schedule(): void {
    if (this.scheduling) {
      this.rerun = true;
      return;
    }
    this.scheduling = true;
    try {
      do {
        this.rerun = false;
        this.scheduleOnce();
      } while (this.rerun);
    } finally {
      this.scheduling = false;
    }
  }

  private scheduleOnce(): void {
    if (this.holdUntil > 0) {
      if (this.queue.size() < this.holdUntil) return;
      trace(`model '${this.modelName}': ${this.queue.size()} requests queued, the delayed scheduler starts`);
      this.holdUntil = 0;
    }
    const now = this.core.clock.nowNs();
    for (const e of this.queue.expire(now)) {
      this.detach(e.item);
      this.settle(e.item, rejection(unavailable('Request timeout expired')), true);
    }
    let wakeAt: bigint | undefined;
    while (this.queue.size() > 0) {
      const instance = this.held ?? this.pool.tryAcquire();
      this.held = undefined;
      if (!instance) {
        this.waitForInstance();
        break;
      }
      if (!this.batching) {
        const one = this.queue.take(1).map((e) => e.item);
        void this.dispatch(instance, one, one[0]!.batchSize, now);
        continue;
      }
      const entries = this.queue.ordered();
      const items: PendingItem[] = new Array(entries.length);
      for (let i = 0; i < entries.length; i++) items[i] = entries[i]!.item.decision;
      const decision = decideBatch(items, this.core.stopping ? { ...this.policy, maxQueueDelayNs: 0n } : this.policy, now);
      if (decision.action === 'send') {
        const batch = this.queue.take(decision.count).map((e) => e.item);
        void this.dispatch(instance, batch, decision.batchSize, now);
        continue;
      }
      this.held = instance;
      if (decision.action === 'wait') wakeAt = decision.untilNs;
      break;
    }
    if (this.queue.size() === 0 && this.held) {
      this.pool.release(this.held);
      this.held = undefined;
    }
    const deadline = this.queue.nextDeadlineNs();
    if (deadline !== undefined && (wakeAt === undefined || deadline + 1n < wakeAt)) wakeAt = deadline + 1n;
    this.timer.armAt(wakeAt, now);
  }

  /** Every instance is busy: ask the pool for the next one, once. */
  private waitForInstance(): void {
    if (this.acquiring) return;
    this.acquiring = true;
    void this.pool.acquire().then((instance) => {
      this.acquiring = false;
      if (this.held) this.pool.release(instance);
      else this.held = instance;
      this.schedule();
    });
  }

  private detach(p: Pending): void {
    p.entry = undefined;
    if (p.onAbort) p.request.signal?.removeEventListener('abort', p.onAbort);
  }

  private async dispatch(instance: ExecutionInstance, batch: Pending[], batchSize: number, now: bigint): Promise<void> {
    for (const p of batch) {
      this.stats.queued(Number(now - p.entry!.enqueuedNs));
      this.detach(p);
    }
    if (trace.enabled)
      trace(
        `model '${this.modelName}' executing batch of ${batch.length} requests (size ${batchSize}) on '${instance.name}'`,
        batch[0]!.request.id,
      );
    const result = await runOnInstance(
      instance,
      batch.map((p) => p.request),
      this.modelName,
    );
    this.pool.release(instance);
    if (result instanceof StatusError) {
      for (const p of batch) this.settle(p, result, true);
    } else {
      this.stats.executed(batchSize, batch.length, result.timing);
      for (const p of batch) p.request.onExecuted?.(result.timing);
      if (result.streams) {
        // A decoupled instance free before its streams end: it serves the next batch meanwhile.
        this.schedule();
        const outcomes = await finalOutcomes(result, batch.length, instance.name, this.modelName);
        batch.forEach((p, i) => this.settle(p, outcomes[i]!, true));
      } else batch.forEach((p, i) => this.settle(p, result.responses[i]!, true));
    }
    this.schedule();
  }

  /** Answer a request, in accept order when preserve_ordering asks for it. */
  private settle(p: Pending, outcome: InferResponse | StatusError, ordered: boolean): void {
    if (!this.preserveOrdering) return this.deliver(p, outcome);
    if (ordered) this.settled.set(p.seq, () => this.deliver(p, outcome));
    else {
      this.deliver(p, outcome); // a cancelled request answers at once and gives up its turn
      this.settled.set(p.seq, () => {});
    }
    while (this.settled.has(this.nextToDeliver)) {
      const fn = this.settled.get(this.nextToDeliver)!;
      this.settled.delete(this.nextToDeliver++);
      fn();
    }
  }

  // A method rather than a named closure made per request: tsx (esbuild
  // keepNames) wraps each of those in an __name() call, ~0.6 µs a request.
  private deliver(p: Pending, outcome: InferResponse | StatusError): void {
    this.core.settle(p.request.arrivalNs!, outcome, p.resolve, p.reject);
  }
}
