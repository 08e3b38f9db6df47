// Which sequence runs where (Triton's SequenceBatchScheduler bookkeeping):
// correlation ID -> live sequence, batch slots (direct: pinned to one slot of
// one instance; oldest: one of max_candidate_sequences), the backlog of
// sequences waiting for a slot, and which sequences went idle. Pure: time is
// passed in; the scheduler owns timers and execution.
import { invalidArg } from '../api/status.ts';
import type { CorrelationId } from '../api/request-parameters.ts';

export interface Slot {
  /** Instance index (direct); -1 when any instance may run it (oldest). */
  instance: number;
  index: number;
}

export interface LiveSequence<T> {
  key: string;
  id: CorrelationId;
  /** Set once admitted to a slot; undefined while in the backlog. */
  slot?: Slot;
  /** Last request seen (ns), for max_sequence_idle_microseconds. */
  lastNs: bigint;
  /** The END request was accepted: no more requests join; release once drained. */
  ended: boolean;
  data: T;
}

export type Admission<T> = { seq: LiveSequence<T>; restarted: boolean };

export class SequenceSlots<T> {
  private readonly byKey = new Map<string, LiveSequence<T>>();
  private readonly free: Slot[] = [];
  private readonly backlog: Array<LiveSequence<T>> = [];
  /** Sequences holding a slot, ended ones included until they drain. */
  private readonly slotted = new Set<LiveSequence<T>>();
  /** Keys released for idleness, so a later request can be told why (bounded). */
  private readonly idleReleased = new Map<string, bigint>();

  /** `slots[i]` = slot count of instance i (direct), or one entry with the candidate count and pinned=false (oldest). */
  constructor(slotsPerInstance: number[], pinned: boolean) {
    slotsPerInstance.forEach((n, instance) => {
      for (let index = 0; index < n; index++) this.free.push({ instance: pinned ? instance : -1, index });
    });
  }

  /**
   * A request of sequence `id` arrived at `nowNs`. START on an unknown ID
   * opens a sequence (a slot if free, else the backlog); START on a live one
   * continues it (Triton: the earlier sequence is cut short, the new one
   * starts in its place). A non-START request needs a live sequence.
   */
  admit(id: CorrelationId, key: string, start: boolean, end: boolean, nowNs: bigint, model: string, data: () => T): Admission<T> {
    let seq = this.byKey.get(key);
    const restarted = start && !!seq;
    if (!seq) {
      if (!start) {
        const idle = this.idleReleased.has(key);
        throw invalidArg(
          `inference request for sequence ${id} to model '${model}' must specify the START flag on the first request of the sequence` +
            (idle ? ' (the sequence was released after max_sequence_idle_microseconds without a request)' : ''),
        );
      }
      this.idleReleased.delete(key);
      seq = { key, id, lastNs: nowNs, ended: false, data: data() };
      this.byKey.set(key, seq);
      const slot = this.takeFree();
      if (slot) {
        seq.slot = slot;
        this.slotted.add(seq);
      } else this.backlog.push(seq);
    }
    seq.lastNs = nowNs;
    if (end) {
      seq.ended = true;
      // The ID is free for a new sequence at once; this one drains its queue.
      this.byKey.delete(key);
    }
    return { seq, restarted };
  }

  /** The free slot with the lowest index (then instance), as Triton's ready-slot queue: batches grow evenly and stay small. */
  private takeFree(): Slot | undefined {
    let best = -1;
    this.free.forEach((s, i) => {
      const b = this.free[best];
      if (!b || s.index < b.index || (s.index === b.index && s.instance < b.instance)) best = i;
    });
    return best < 0 ? undefined : this.free.splice(best, 1)[0];
  }

  /** A drained, ended (or idle) sequence gives its slot back; returns the backlog sequence that took it. */
  release(seq: LiveSequence<T>): LiveSequence<T> | undefined {
    if (this.byKey.get(seq.key) === seq) this.byKey.delete(seq.key);
    const slot = seq.slot;
    seq.slot = undefined;
    this.slotted.delete(seq);
    const i = this.backlog.indexOf(seq);
    if (i >= 0) this.backlog.splice(i, 1);
    if (!slot) return undefined;
    const next = this.backlog.shift();
    if (next) {
      next.slot = slot;
      this.slotted.add(next);
      return next;
    }
    this.free.push(slot);
    return undefined;
  }

  /** Live (not ended) sequences idle past `maxIdleNs` at `nowNs` that `canRelease` allows. */
  idle(nowNs: bigint, maxIdleNs: bigint, canRelease: (s: LiveSequence<T>) => boolean): Array<LiveSequence<T>> {
    return [...this.byKey.values()].filter((s) => nowNs - s.lastNs >= maxIdleNs && canRelease(s));
  }

  /** Release an idle sequence and remember why (for the error of a later request). */
  releaseIdle(seq: LiveSequence<T>, nowNs: bigint): LiveSequence<T> | undefined {
    this.idleReleased.set(seq.key, nowNs);
    if (this.idleReleased.size > 10_000) this.idleReleased.delete(this.idleReleased.keys().next().value!);
    return this.release(seq);
  }

  /** The earliest time a live sequence can go idle, or undefined when none is live. */
  nextIdleAt(maxIdleNs: bigint): bigint | undefined {
    let at: bigint | undefined;
    for (const s of this.byKey.values()) if (at === undefined || s.lastNs + maxIdleNs < at) at = s.lastNs + maxIdleNs;
    return at;
  }

  /** Sequences holding a slot (on `instance` for direct). */
  inSlots(instance?: number): Array<LiveSequence<T>> {
    return [...this.slotted].filter((s) => instance === undefined || s.slot!.instance === instance);
  }

  /** Sequences waiting for a slot, oldest first. */
  backlogged(): ReadonlyArray<LiveSequence<T>> {
    return this.backlog;
  }

  get liveCount(): number {
    return this.byKey.size;
  }
  get backlogCount(): number {
    return this.backlog.length;
  }
}
