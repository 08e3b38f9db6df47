// The dynamic batcher's queue (Triton's PriorityQueue / PolicyQueue in
// scheduler_utils.cc): one FIFO per priority level, each with its queue
// policy (max_queue_size, default timeout, override, REJECT/DELAY). Pure data
// structure: callers pass the time in, and it never sets timers or settles
// promises itself. Also home of the Clock the schedulers are built on (its
// timers are the native addon's, to the microsecond).
import type { DynamicBatching, QueuePolicy } from '../api/model-config.ts';
import { invalidArg, unavailable } from '../api/status.ts';
import { wakeAt } from '../../native/precise-timer.ts';

/** Time source and timers, injectable so scheduler tests never sleep. */
export interface Clock {
  nowNs(): bigint;
  setTimer(fn: () => void, delayNs: bigint): { cancel(): void };
}

/**
 * process.hrtime.bigint() and the addon's timerfd wake-ups (native/precise-timer.ts):
 * setTimeout counts whole milliseconds, which would stretch a 500 us batching window to 1-2 ms.
 */
export const systemClock: Clock = {
  nowNs: () => process.hrtime.bigint(),
  setTimer: (fn, delayNs) => wakeAt(process.hrtime.bigint() + (delayNs > 0n ? delayNs : 0n), fn),
};

/** One queued item with its place and timeout. */
export interface QueueEntry<T> {
  readonly item: T;
  /** Priority level it is queued at (0 when the model has no levels). */
  readonly level: number;
  readonly enqueuedNs: bigint;
  /** Absolute timeout; 0n = none (and always 0n once delayed). */
  deadlineNs: bigint;
  /** Timed out under a DELAY policy: queued behind its level's other requests. */
  delayed: boolean;
}

interface Level<T> {
  policy: Required<QueuePolicy>;
  main: QueueEntry<T>[];
  delayed: QueueEntry<T>[];
}

function fullPolicy(p: QueuePolicy | undefined): Required<QueuePolicy> {
  return {
    timeout_action: p?.timeout_action ?? 'REJECT',
    default_timeout_microseconds: p?.default_timeout_microseconds ?? 0,
    allow_timeout_override: p?.allow_timeout_override ?? false,
    max_queue_size: p?.max_queue_size ?? 0,
  };
}

/**
 * Priority levels and queue policies. Level 1 is the highest priority; the
 * order it hands out is: levels ascending, and within a level the unexpired
 * requests FIFO, then the DELAYed ones FIFO.
 */
export class SchedulerQueue<T> {
  /** Levels in priority order (inserted ascending). */
  private readonly levels = new Map<number, Level<T>>();
  private readonly priorityLevels: number;
  private readonly defaultLevel: number;
  private count = 0;

  constructor(
    private readonly modelName: string,
    config: DynamicBatching = {},
  ) {
    this.priorityLevels = config.priority_levels ?? 0;
    this.defaultLevel = this.priorityLevels > 0 ? config.default_priority_level || 1 : 0;
    if (this.priorityLevels === 0) {
      this.levels.set(0, { policy: fullPolicy(config.default_queue_policy), main: [], delayed: [] });
    } else {
      for (let l = 1; l <= this.priorityLevels; l++) {
        const p = config.priority_queue_policy?.[String(l)] ?? config.default_queue_policy;
        this.levels.set(l, { policy: fullPolicy(p), main: [], delayed: [] });
      }
    }
  }

  /** Number of queued entries (delayed included). */
  size(): number {
    return this.count;
  }

  /**
   * The level a request priority maps to: 0 = default level; above
   * priority_levels is INVALID_ARG. Models without levels ignore priorities.
   */
  levelOf(priority: number | undefined): number {
    if (this.priorityLevels === 0) return 0;
    const p = priority ?? 0;
    if (p === 0) return this.defaultLevel;
    if (!Number.isInteger(p) || p < 0 || p > this.priorityLevels) {
      throw invalidArg(`request priority ${p} for model '${this.modelName}' must be between 0 and ${this.priorityLevels}`);
    }
    return p;
  }

  /**
   * Queue an item. Throws INVALID_ARG for a bad priority and UNAVAILABLE when
   * its level holds max_queue_size entries. The timeout is the level's
   * default, or the request's `timeoutUs` when the policy allows overrides and
   * it is smaller (as Triton: an override can shorten, never lengthen, and
   * there is nothing to shorten when the default is 0 = no timeout).
   */
  enqueue(item: T, priority: number | undefined, timeoutUs: number | undefined, nowNs: bigint): QueueEntry<T> {
    const level = this.levelOf(priority);
    const q = this.levels.get(level)!;
    const { max_queue_size, default_timeout_microseconds, allow_timeout_override } = q.policy;
    if (max_queue_size > 0 && q.main.length + q.delayed.length >= max_queue_size) {
      throw unavailable(`Exceeds maximum queue size for model '${this.modelName}'`);
    }
    let timeout = default_timeout_microseconds;
    if (allow_timeout_override && timeoutUs && timeoutUs > 0 && timeoutUs < timeout) timeout = timeoutUs;
    const entry: QueueEntry<T> = {
      item,
      level,
      enqueuedNs: nowNs,
      deadlineNs: timeout > 0 ? nowNs + BigInt(Math.round(timeout * 1000)) : 0n,
      delayed: false,
    };
    q.main.push(entry);
    this.count++;
    return entry;
  }

  /**
   * Apply the timeout policies at `nowNs`: entries past their deadline move
   * behind their level (DELAY, never to time out again) or leave the queue
   * (REJECT) and are returned for the caller to reject.
   */
  expire(nowNs: bigint): QueueEntry<T>[] {
    const rejected: QueueEntry<T>[] = [];
    for (const q of this.levels.values()) {
      if (!q.main.some((e) => e.deadlineNs !== 0n && nowNs > e.deadlineNs)) continue;
      const keep: QueueEntry<T>[] = [];
      for (const e of q.main) {
        if (e.deadlineNs === 0n || nowNs <= e.deadlineNs) keep.push(e);
        else if (q.policy.timeout_action === 'DELAY') {
          e.deadlineNs = 0n;
          e.delayed = true;
          q.delayed.push(e);
        } else rejected.push(e);
      }
      q.main = keep;
    }
    this.count -= rejected.length;
    return rejected;
  }

  /** The earliest deadline of any queued entry, or undefined. */
  nextDeadlineNs(): bigint | undefined {
    let next: bigint | undefined;
    for (const q of this.levels.values()) {
      for (const e of q.main) {
        if (e.deadlineNs !== 0n && (next === undefined || e.deadlineNs < next)) next = e.deadlineNs;
      }
    }
    return next;
  }

  /** All entries in dispatch order. */
  ordered(): QueueEntry<T>[] {
    const out: QueueEntry<T>[] = [];
    for (const q of this.levels.values()) {
      out.push(...q.main, ...q.delayed);
    }
    return out;
  }

  /** Remove and return the first `n` entries in dispatch order. */
  take(n: number): QueueEntry<T>[] {
    const taken: QueueEntry<T>[] = [];
    for (const q of this.levels.values()) {
      if (taken.length < n) taken.push(...q.main.splice(0, n - taken.length));
      if (taken.length < n) taken.push(...q.delayed.splice(0, n - taken.length));
    }
    this.count -= taken.length;
    return taken;
  }

  /** Remove one entry (e.g. its request was cancelled); false if it is not queued. */
  remove(entry: QueueEntry<T>): boolean {
    const q = this.levels.get(entry.level);
    if (!q) return false;
    const list = entry.delayed ? q.delayed : q.main;
    const i = list.indexOf(entry);
    if (i < 0) return false;
    list.splice(i, 1);
    this.count--;
    return true;
  }
}
