// The dynamic batcher's one decision, "send a batch now or wait" (Triton's
// DynamicBatchScheduler::GetDynamicBatch), as a pure function of the pending
// queue, the batching config and the time. No clock, no timers, no state:
// the scheduler calls it whenever an instance is free or a timer fires.
import type { InferRequest } from '../api/infer-request.ts';

/** One queued request as the decision sees it, in dispatch order. */
export interface PendingItem {
  /** The request's batch size (dim 0 of its inputs; 1 when the model does not batch). */
  batchSize: number;
  /** Requests batch together only when their keys are equal (see batchShapeKey). */
  shapeKey: string;
  /** When the request entered the scheduler's queue. */
  enqueuedNs: bigint;
}

/** The dynamic_batching settings the decision needs, normalized. */
export interface BatchPolicy {
  /** The model's max_batch_size; <= 0 means every request runs alone. */
  maxBatchSize: number;
  /** preferred_batch_size values (any order); empty = none. */
  preferredSizes: readonly number[];
  /** max_queue_delay_microseconds in ns; 0 = never wait. */
  maxQueueDelayNs: bigint;
}

export type BatchDecision =
  /** Send the first `count` pending requests (total batch size `batchSize`) as one batch. */
  | { action: 'send'; count: number; batchSize: number }
  /** Nothing to send yet; decide again at `untilNs` (or when the queue changes). */
  | { action: 'wait'; untilNs: bigint }
  /** The queue is empty. */
  | { action: 'idle' };

/**
 * Decide whether to send a batch from the head of `pending` now.
 *
 * The candidate batch is the longest prefix of `pending` whose requests share
 * the first one's shape key and whose batch sizes sum to at most
 * maxBatchSize (a request that does not fit, or does not match, ends it: the
 * batcher never reorders requests to fill a batch). Then, as Triton does:
 * - if the prefix reaches a preferred size, and the oldest request of the
 *   batch has not waited max_queue_delay yet, send the largest preferred size
 *   reached (or, when the next request would overshoot the largest preferred
 *   size, what fits before it);
 * - else send the whole prefix when it cannot grow (next request does not fit
 *   or does not match, or it reached the largest preferred size /
 *   max_batch_size), when the delay is exceeded, or when the delay is 0;
 * - else wait until the oldest request of the batch has waited the delay.
 */
const NO_SIZES: ReadonlySet<number> = new Set();

export function decideBatch(pending: ReadonlyArray<PendingItem>, policy: BatchPolicy, nowNs: bigint): BatchDecision {
  if (pending.length === 0) return { action: 'idle' };
  const maxBatch = Math.max(1, policy.maxBatchSize);
  // No preferred sizes (the common case): no set built per decision.
  const preferred = policy.preferredSizes.length ? new Set(policy.preferredSizes.filter((p) => p > 0 && p <= maxBatch)) : NO_SIZES;
  const maxPreferred = preferred.size > 0 ? Math.max(...preferred) : maxBatch;

  let count = 0;
  let size = 0;
  let bestCount = 0;
  let bestSize = 0;
  let blocked = false;
  let oldest = pending[0]!.enqueuedNs;
  const key = pending[0]!.shapeKey;

  for (const item of pending) {
    const bs = Math.max(1, item.batchSize);
    if (count > 0) {
      // Growing past the largest preferred size: remember what fits before it.
      if (size + bs > maxPreferred && bestCount === 0) {
        bestCount = count;
        bestSize = size;
      }
      if (size + bs > maxBatch || item.shapeKey !== key) {
        blocked = true;
        break;
      }
    }
    size += bs;
    count += 1;
    if (item.enqueuedNs < oldest) oldest = item.enqueuedNs;
    if (preferred.has(size)) {
      bestCount = count;
      bestSize = size;
    }
  }

  const delay = policy.maxQueueDelayNs;
  const delayExceeded = delay > 0n && nowNs - oldest >= delay;

  if (bestCount > 0 && !delayExceeded) return { action: 'send', count: bestCount, batchSize: bestSize };
  if (blocked || size >= maxPreferred || delayExceeded || delay <= 0n) {
    return { action: 'send', count, batchSize: size };
  }
  return { action: 'wait', untilNs: oldest + delay };
}

/**
 * The key under which requests may batch together: input names, datatypes and
 * shapes apart from dim 0 (the whole shape when the model does not batch).
 * Inputs named in `raggedInputs` (allow_ragged_batch) do not need equal shapes.
 */
export function batchShapeKey(request: InferRequest, maxBatchSize: number, raggedInputs: ReadonlySet<string> = new Set()): string {
  const parts = request.inputs.map((input) => {
    const dims = maxBatchSize > 0 ? input.shape.slice(1) : input.shape;
    const shape = raggedInputs.has(input.name) ? '*' : dims.join(',');
    return `${input.name}\u0000${input.datatype}\u0000${shape}`;
  });
  return parts.sort().join('\u0001');
}
