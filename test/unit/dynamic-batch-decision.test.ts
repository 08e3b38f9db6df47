import { describe, expect, it } from 'vitest';
import { batchShapeKey, decideBatch, type BatchPolicy, type PendingItem } from '../../engine/scheduling/dynamic-batch-decision.ts';
import type { InferRequest } from '../../engine/api/infer-request.ts';

const US = 1000n;
/** n requests of batch size 1, key 'a', enqueued at t (ns) each. */
function items(n: number, t = 0n, key = 'a', batchSize = 1): PendingItem[] {
  return Array.from({ length: n }, () => ({ batchSize, shapeKey: key, enqueuedNs: t }));
}
function policy(p: Partial<BatchPolicy>): BatchPolicy {
  return { maxBatchSize: 8, preferredSizes: [], maxQueueDelayNs: 0n, ...p };
}

describe('decideBatch', () => {
  it('is idle on an empty queue', () => {
    expect(decideBatch([], policy({}), 0n)).toEqual({ action: 'idle' });
  });

  it('with delay 0 sends everything queued at once (greedy), capped at max_batch_size', () => {
    expect(decideBatch(items(3), policy({}), 0n)).toEqual({ action: 'send', count: 3, batchSize: 3 });
    expect(decideBatch(items(11), policy({}), 0n)).toEqual({ action: 'send', count: 8, batchSize: 8 });
  });

  it('without preferred sizes waits for max_batch_size or the delay of the oldest request', () => {
    const p = policy({ maxQueueDelayNs: 100n * US });
    const pending = [...items(1, 10n * US), ...items(2, 50n * US)];
    expect(decideBatch(pending, p, 60n * US)).toEqual({ action: 'wait', untilNs: 110n * US });
    expect(decideBatch(pending, p, 110n * US - 1n)).toEqual({ action: 'wait', untilNs: 110n * US });
    expect(decideBatch(pending, p, 110n * US)).toEqual({ action: 'send', count: 3, batchSize: 3 });
    // Reaching max_batch_size sends before the delay.
    expect(decideBatch(items(8, 0n), p, 1n)).toEqual({ action: 'send', count: 8, batchSize: 8 });
    expect(decideBatch(items(9, 0n), p, 1n)).toEqual({ action: 'send', count: 8, batchSize: 8 });
  });

  it('the oldest request of the batch sets the deadline, wherever it sits in the queue', () => {
    // A newer high-priority request can sit ahead of an older one.
    const pending = [...items(1, 500n), ...items(1, 100n)];
    const d = decideBatch(pending, policy({ maxQueueDelayNs: 1000n }), 600n);
    expect(d).toEqual({ action: 'wait', untilNs: 1100n });
  });

  it('sends a preferred size as soon as it is reached', () => {
    const p = policy({ preferredSizes: [4], maxQueueDelayNs: 1_000_000n * US });
    expect(decideBatch(items(3), p, 0n)).toMatchObject({ action: 'wait' });
    expect(decideBatch(items(4), p, 0n)).toEqual({ action: 'send', count: 4, batchSize: 4 });
  });

  it('sends the largest preferred size reachable now', () => {
    const p = policy({ preferredSizes: [2, 4, 6], maxQueueDelayNs: 1_000_000n });
    expect(decideBatch(items(5), p, 0n)).toEqual({ action: 'send', count: 4, batchSize: 4 });
    expect(decideBatch(items(7), p, 0n)).toEqual({ action: 'send', count: 6, batchSize: 6 });
    expect(decideBatch(items(3), p, 0n)).toEqual({ action: 'send', count: 2, batchSize: 2 });
    expect(decideBatch(items(1), p, 0n)).toEqual({ action: 'wait', untilNs: 1_000_000n });
  });

  it('with preferred sizes and delay 0 still sends only the preferred batch', () => {
    const p = policy({ preferredSizes: [2] });
    expect(decideBatch(items(3), p, 0n)).toEqual({ action: 'send', count: 2, batchSize: 2 });
    expect(decideBatch(items(1), p, 0n)).toEqual({ action: 'send', count: 1, batchSize: 1 });
  });

  it('once the delay is exceeded sends all pending (up to max_batch_size), not just the preferred size', () => {
    const p = policy({ preferredSizes: [2], maxQueueDelayNs: 100n });
    expect(decideBatch(items(5, 0n), p, 100n)).toEqual({ action: 'send', count: 5, batchSize: 5 });
    expect(decideBatch(items(12, 0n), p, 100n)).toEqual({ action: 'send', count: 8, batchSize: 8 });
  });

  it('when the next request would overshoot the largest preferred size, sends what fits before it', () => {
    const p = policy({ preferredSizes: [4], maxQueueDelayNs: 1_000_000n });
    // Batch sizes 3 then 3: 6 > 4, so the 3 goes alone rather than wait.
    expect(decideBatch(items(2, 0n, 'a', 3), p, 0n)).toEqual({ action: 'send', count: 1, batchSize: 3 });
  });

  it('counts request batch sizes, never exceeding max_batch_size', () => {
    const p = policy({ maxBatchSize: 4, maxQueueDelayNs: 1000n });
    const pending: PendingItem[] = [
      { batchSize: 3, shapeKey: 'a', enqueuedNs: 0n },
      { batchSize: 2, shapeKey: 'a', enqueuedNs: 0n },
    ];
    expect(decideBatch(pending, p, 0n)).toEqual({ action: 'send', count: 1, batchSize: 3 });
    expect(decideBatch(pending.slice(1).concat(pending.slice(1)), p, 0n)).toEqual({
      action: 'send',
      count: 2,
      batchSize: 4,
    });
  });

  it('never batches different shape keys, and does not wait behind a mismatch', () => {
    const p = policy({ maxQueueDelayNs: 1_000_000n });
    const pending = [...items(2, 0n, 'a'), ...items(3, 0n, 'b'), ...items(1, 0n, 'a')];
    expect(decideBatch(pending, p, 0n)).toEqual({ action: 'send', count: 2, batchSize: 2 });
    // The tail that can still grow waits.
    expect(decideBatch(pending.slice(5), p, 0n)).toMatchObject({ action: 'wait' });
  });

  it('without batching (max_batch_size 0) sends one request at a time', () => {
    const p = policy({ maxBatchSize: 0, maxQueueDelayNs: 1000n });
    expect(decideBatch(items(3), p, 0n)).toEqual({ action: 'send', count: 1, batchSize: 1 });
  });
});

describe('batchShapeKey', () => {
  const req = (inputs: Array<[string, 'FP32' | 'INT32', number[]]>): InferRequest => ({
    modelName: 'm',
    inputs: inputs.map(([name, datatype, shape]) => ({ name, datatype, shape, data: new Uint8Array() })),
    outputs: [],
    parameters: {},
  });

  it('ignores dim 0 and input order when the model batches', () => {
    const a = req([
      ['X', 'FP32', [1, 4]],
      ['Y', 'INT32', [1, 2]],
    ]);
    const b = req([
      ['Y', 'INT32', [3, 2]],
      ['X', 'FP32', [3, 4]],
    ]);
    expect(batchShapeKey(a, 8)).toBe(batchShapeKey(b, 8));
    expect(batchShapeKey(a, 0)).not.toBe(batchShapeKey(b, 0));
  });

  it('differs by name, datatype, inner dims and input set', () => {
    const base = batchShapeKey(req([['X', 'FP32', [1, 4]]]), 8);
    expect(batchShapeKey(req([['Z', 'FP32', [1, 4]]]), 8)).not.toBe(base);
    expect(batchShapeKey(req([['X', 'INT32', [1, 4]]]), 8)).not.toBe(base);
    expect(batchShapeKey(req([['X', 'FP32', [1, 5]]]), 8)).not.toBe(base);
    expect(
      batchShapeKey(
        req([
          ['X', 'FP32', [1, 4]],
          ['Y', 'FP32', [1, 4]],
        ]),
        8,
      ),
    ).not.toBe(base);
  });

  it('lets allow_ragged_batch inputs differ in shape', () => {
    const ragged = new Set(['X']);
    expect(batchShapeKey(req([['X', 'FP32', [1, 4]]]), 8, ragged)).toBe(batchShapeKey(req([['X', 'FP32', [1, 9]]]), 8, ragged));
  });
});
