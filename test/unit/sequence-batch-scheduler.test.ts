// The sequence batcher with a fake clock and fake instances: in-order
// execution per sequence, direct pinning, oldest batching after the queue
// delay, idle release by the clock, all without sleeping.
import { describe, expect, it } from 'vitest';
import { SequenceBatchScheduler } from '../../engine/scheduling/sequence-batch-scheduler.ts';
import { InstancePool } from '../../engine/scheduling/instance-pool.ts';
import type { InferRequest } from '../../engine/api/infer-request.ts';
import type { ModelConfig } from '../../engine/api/model-config.ts';
import type { StatsSink } from '../../engine/api/scheduler.ts';
import { FakeClock, FakeInstance, flush } from '../fixtures/fake-scheduling.ts';

const stats: StatsSink = { queued() {}, executed() {}, succeeded() {}, failed() {} };
const config = (sb: Record<string, unknown>): ModelConfig =>
  ({
    name: 'm',
    max_batch_size: 2,
    input: [{ name: 'IN', data_type: 'TYPE_FP32', dims: [1] }],
    output: [],
    sequence_batching: sb,
  }) as ModelConfig;
const req = (id: string, seq: number | string, start = false, end = false): InferRequest => ({
  modelName: 'm',
  id,
  inputs: [{ name: 'IN', datatype: 'FP32', shape: [1, 1], data: new Uint8Array(4) }],
  outputs: [],
  parameters: { sequence_id: seq, sequence_start: start, sequence_end: end },
});

describe('SequenceBatchScheduler', () => {
  it('direct: pins sequences to instances and runs each sequence in order', async () => {
    const clock = new FakeClock();
    const [i0, i1] = [new FakeInstance('i0'), new FakeInstance('i1')];
    const s = new SequenceBatchScheduler({
      modelName: 'm',
      config: config({ direct: {} }),
      pool: new InstancePool([i0, i1]),
      stats,
      clock,
    });
    // Two slots per instance, the lowest free slot index first (Triton's order): sequence 1 on i0, 2 on i1, 3 on i0's second slot.
    const done = [
      s.enqueue(req('a1', 1, true)),
      s.enqueue(req('b1', 2, true)),
      s.enqueue(req('c1', 3, true)),
      s.enqueue(req('a2', 1, false, true)),
    ];
    await flush();
    // No queue delay: a1 left at once; b1 went to its own instance, not to i0's queue.
    expect(i0.batches).toEqual([['a1']]);
    expect(i1.batches).toEqual([['b1']]);
    await i0.complete();
    // a2 and c1 batch together in slot order; a2 waited for a1 (one request of a sequence at a time).
    expect(i0.batches[1]).toEqual(['a2', 'c1']);
    await i0.complete();
    await i1.complete();
    expect((await Promise.all(done)).map((r) => r.id)).toEqual(['a1', 'b1', 'c1', 'a2']);
    expect(s.inflightCount()).toBe(0);
  });

  it('oldest: waits max_queue_delay for a fuller batch across sequences', async () => {
    const clock = new FakeClock();
    const i0 = new FakeInstance('i0');
    const s = new SequenceBatchScheduler({
      modelName: 'm',
      config: config({ oldest: { max_candidate_sequences: 4, max_queue_delay_microseconds: 100 } }),
      pool: new InstancePool([i0]),
      stats,
      clock,
    });
    const a = s.enqueue(req('x', 'x', true, true));
    await flush();
    expect(i0.batches).toEqual([]);
    await clock.advance(50_000n);
    const b = s.enqueue(req('y', 'y', true, true));
    await flush();
    expect(i0.batches).toEqual([['x', 'y']]); // max_batch_size 2 reached: sent at once
    await i0.complete();
    await Promise.all([a, b]);
    const c = s.enqueue(req('z', 'z', true, true));
    await clock.advance(99_000n);
    expect(i0.batches.length).toBe(1);
    await clock.advance(1_000n);
    expect(i0.batches[1]).toEqual(['z']);
    await i0.complete();
    await c;
  });

  it('releases an idle sequence when the clock passes max_sequence_idle_microseconds', async () => {
    const clock = new FakeClock();
    const i0 = new FakeInstance('i0');
    const s = new SequenceBatchScheduler({
      modelName: 'm',
      config: config({ direct: {}, max_sequence_idle_microseconds: 1000 }),
      pool: new InstancePool([i0]),
      stats,
      clock,
    });
    const first = s.enqueue(req('a1', 7, true));
    await flush();
    await i0.complete();
    await first;
    await clock.advance(999_000n);
    const second = s.enqueue(req('a2', 7));
    await flush();
    await i0.complete();
    await second; // still live: 999 us after its last request
    await clock.advance(1_001_000n);
    await expect(s.enqueue(req('a3', 7))).rejects.toThrow(/released after max_sequence_idle_microseconds/);
    await expect(s.enqueue(req('n', 0, true))).rejects.toThrow(
      "inference request to model 'm' must specify a non-zero or non-empty correlation ID",
    );
    await s.stop();
  });
});
