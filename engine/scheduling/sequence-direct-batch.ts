// The direct strategy's batch decision (Triton's DirectSequenceBatch): one
// instance's batch is its slots 0..k in slot order, k the highest slot with
// a request ready. A slot with nothing ready, or whose request's shape does
// not match the batch's first request (an input that does not allow ragged
// batches), still takes its place as a null request (READY false): a model
// that keeps state per batch slot sees every sequence in the same row each
// time. With max_queue_delay_microseconds and minimum_slot_utilization both
// set, the batch waits until enough slots are ready or its oldest request
// waited the delay. Also the two delay test hooks' hold check. Pure.

/** One batch slot of one instance as the decision sees it. */
export interface DirectSlotView {
  /** The slot's sequence has a request ready (queued, not running). */
  ready: boolean;
  /** The ready request's shape key (batchShapeKey). */
  shapeKey?: string;
  /** When the ready request entered the queue. */
  enqueuedNs?: bigint;
}

export interface DirectPolicy {
  /** max(1, max_batch_size): the slot count the utilization is taken of. */
  slotCount: number;
  /** direct.max_queue_delay_microseconds in ns (0: never wait). */
  maxQueueDelayNs: bigint;
  /** direct.minimum_slot_utilization (0: never wait). */
  minSlotUtilization: number;
}

export type DirectDecision =
  /** Run slots 0..slots.length-1: 'run' takes the slot's next request, 'null' pads the slot. */
  | { action: 'send'; slots: Array<'run' | 'null'> }
  /** Decide again at `untilNs` (or when a request arrives). */
  | { action: 'wait'; untilNs: bigint }
  | { action: 'idle' };

export function decideDirectBatch(slots: readonly DirectSlotView[], policy: DirectPolicy, nowNs: bigint): DirectDecision {
  let last = -1;
  let readyCount = 0;
  let oldest: bigint | undefined;
  let key: string | undefined;
  slots.forEach((s, i) => {
    if (!s.ready) return;
    last = i;
    readyCount++;
    if (key === undefined) key = s.shapeKey ?? '';
    if (s.enqueuedNs !== undefined && (oldest === undefined || s.enqueuedNs < oldest)) oldest = s.enqueuedNs;
  });
  if (last < 0) return { action: 'idle' };
  if (policy.maxQueueDelayNs > 0n && policy.minSlotUtilization > 0) {
    const waited = oldest === undefined ? policy.maxQueueDelayNs : nowNs - oldest;
    const full = readyCount / Math.max(1, policy.slotCount) >= policy.minSlotUtilization;
    if (!full && waited < policy.maxQueueDelayNs) return { action: 'wait', untilNs: nowNs + (policy.maxQueueDelayNs - waited) };
  }
  const out: Array<'run' | 'null'> = [];
  for (let i = 0; i <= last; i++) out.push(slots[i]!.ready && (slots[i]!.shapeKey ?? '') === key ? 'run' : 'null');
  return { action: 'send', slots: out };
}

/**
 * The test hooks TRITONSERVER_DELAY_SCHEDULER and
 * TRITONSERVER_BACKLOG_DELAY_SCHEDULER, as Triton's sequence batcher reads
 * them: nothing starts while fewer than `delay` requests wait in the slots'
 * queues, or (when `backlogDelay` > 0) fewer than `backlogDelay` requests
 * wait in the backlog.
 */
export function schedulerHeld(slotted: number, backlogged: number, delay: number, backlogDelay: number): boolean {
  return slotted < delay || (backlogDelay > 0 && backlogged < backlogDelay);
}

/** TRITONSERVER_BACKLOG_DELAY_SCHEDULER as a count (0: unset or not a positive integer). */
export function backlogDelayFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const n = Number(env.TRITONSERVER_BACKLOG_DELAY_SCHEDULER ?? '');
  return Number.isInteger(n) && n > 0 ? n : 0;
}
