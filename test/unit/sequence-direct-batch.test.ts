// The direct strategy's batch decision and null requests (Triton's
// DirectSequenceBatch), the two delay test hooks' hold check, and the
// scheduler padding idle slots, with a fake clock and fake instances.
import { describe, expect, it } from 'vitest';
import {
  backlogDelayFromEnv,
  decideDirectBatch,
  schedulerHeld,
  type DirectSlotView,
} from '../../engine/scheduling/sequence-direct-batch.ts';
import { SequenceBatchScheduler } from '../../engine/scheduling/sequence-batch-scheduler.ts';
import { InstancePool } from '../../engine/scheduling/instance-pool.ts';
import type { InferRequest } from '../../engine/api/infer-request.ts';
import type { ModelConfig } from '../../engine/api/model-config.ts';
import type { StatsSink } from '../../engine/api/scheduler.ts';
import { FakeClock, FakeInstance, flush } from '../fixtures/fake-scheduling.ts';

const MS = 1_000_000n;
const ready = (enqueuedMs = 0, shapeKey = 'k'): DirectSlotView => ({ ready: true, shapeKey, enqueuedNs: BigInt(enqueuedMs) * MS });
const idle: DirectSlotView = { ready: false };
const noDelay = { slotCount: 4, maxQueueDelayNs: 0n, minSlotUtilization: 0 };

describe('decideDirectBatch', () => {
  it('runs slots 0..k in slot order, an idle slot below k padded with a null request', () => {
    expect(decideDirectBatch([idle, ready(), idle, ready(), idle], noDelay, 0n)).toEqual({
      action: 'send',
      slots: ['null', 'run', 'null', 'run'],
    });
    expect(decideDirectBatch([ready(), idle, idle, idle], noDelay, 0n)).toEqual({ action: 'send', slots: ['run'] });
    expect(decideDirectBatch([idle, idle], noDelay, 0n)).toEqual({ action: 'idle' });
  });

  it("Triton's test_ragged_batch: a request whose shape differs from the first ready slot's is padded, not batched", () => {
    const d = decideDirectBatch([ready(0, '[2]'), ready(0, '[2]'), ready(0, '[1]'), ready(0, '[3]')], noDelay, 0n);
    expect(d).toEqual({ action: 'send', slots: ['run', 'run', 'null', 'null'] });
    // Once slots 0 and 1 end, slot 2 leads: the batch is still 4 wide.
    expect(decideDirectBatch([idle, idle, ready(0, '[1]'), ready(0, '[3]')], noDelay, 0n)).toEqual({
      action: 'send',
      slots: ['null', 'null', 'run', 'null'],
    });
  });

  it('with max_queue_delay_microseconds and minimum_slot_utilization: waits for enough ready slots or the delay', () => {
    const half = { slotCount: 4, maxQueueDelayNs: 3000n * MS, minSlotUtilization: 0.5 };
    // 1 of 4 ready: wait until the oldest request waited the delay.
    expect(decideDirectBatch([idle, ready(1000)], half, 1000n * MS)).toEqual({ action: 'wait', untilNs: 4000n * MS });
    expect(decideDirectBatch([idle, ready(1000)], half, 4000n * MS)).toEqual({ action: 'send', slots: ['null', 'run'] });
    // 2 of 4 reach 0.5: at once.
    expect(decideDirectBatch([ready(0), ready(1000)], half, 1000n * MS)).toEqual({ action: 'send', slots: ['run', 'run'] });
    // Full utilization asked: 2 of 4 wait for the oldest's delay.
    const full = { ...half, minSlotUtilization: 1 };
    expect(decideDirectBatch([ready(0), ready(1000)], full, 1000n * MS)).toEqual({ action: 'wait', untilNs: 3000n * MS });
    // Either setting at 0: never waits (Triton's no_min_util case).
    expect(decideDirectBatch([ready(1000)], { ...half, minSlotUtilization: 0 }, 1000n * MS).action).toBe('send');
    expect(decideDirectBatch([ready(1000)], { ...half, maxQueueDelayNs: 0n }, 1000n * MS).action).toBe('send');
  });
});

describe('delay test hooks', () => {
  it('holds until enough requests wait in slots and, when asked, in the backlog', () => {
    expect(schedulerHeld(9, 2, 10, 2)).toBe(true);
    expect(schedulerHeld(10, 1, 10, 2)).toBe(true);
    expect(schedulerHeld(10, 2, 10, 2)).toBe(false);
    expect(schedulerHeld(10, 0, 10, 0)).toBe(false);
    expect(schedulerHeld(0, 0, 0, 0)).toBe(false);
  });

  it('reads TRITONSERVER_BACKLOG_DELAY_SCHEDULER as a positive count, anything else as none', () => {
    expect(backlogDelayFromEnv({ TRITONSERVER_BACKLOG_DELAY_SCHEDULER: '3' })).toBe(3);
    for (const v of [undefined, '', '0', '-1', '2.5', 'x'])
      expect(backlogDelayFromEnv({ TRITONSERVER_BACKLOG_DELAY_SCHEDULER: v })).toBe(0);
  });
});

describe('SequenceBatchScheduler (direct) pads idle slots', () => {
  const config = {
    name: 'm',
    max_batch_size: 4,
    input: [{ name: 'IN', data_type: 'TYPE_FP32', dims: [1] }],
    output: [{ name: 'OUT', data_type: 'TYPE_FP32', dims: [1] }],
    sequence_batching: {
      direct: {},
      control_input: [{ name: 'READY', control: [{ kind: 'CONTROL_SEQUENCE_READY', fp32_false_true: [0, 1] }] }],
    },
  } as unknown as ModelConfig;
  const req = (id: string, seq: number, start = false, end = false): InferRequest => ({
    modelName: 'm',
    id,
    inputs: [{ name: 'IN', datatype: 'FP32', shape: [1, 1], data: new Uint8Array(new Float32Array([7]).buffer) }],
    outputs: [],
    parameters: { sequence_id: seq, sequence_start: start, sequence_end: end },
  });

  it("a sequence in slot 1 runs in row 1 beside a null request (READY 0, zeroed inputs) while slot 0's sequence is idle", async () => {
    const executed: Array<[number, number, number | undefined]> = [];
    const stats: StatsSink = { queued() {}, executed: (b, n, _t, padded) => executed.push([b, n, padded]), succeeded() {}, failed() {} };
    const seen: InferRequest[][] = [];
    const i0 = new FakeInstance('i0');
    const execute = i0.execute.bind(i0);
    i0.execute = (rs) => (seen.push(rs), execute(rs));
    const s = new SequenceBatchScheduler({ modelName: 'm', config, pool: new InstancePool([i0]), stats, clock: new FakeClock() });
    const a1 = s.enqueue(req('a1', 1, true));
    await flush();
    const b1 = s.enqueue(req('b1', 2, true));
    await i0.complete();
    expect(i0.batches).toEqual([['a1'], [undefined, 'b1']]);
    const [pad, real] = seen[1]!;
    const f32 = (r: InferRequest, name: string) => new Float32Array(Uint8Array.from(r.inputs.find((t) => t.name === name)!.data).buffer)[0];
    expect([f32(pad!, 'READY'), f32(pad!, 'IN'), f32(real!, 'READY'), f32(real!, 'IN')]).toEqual([0, 0, 1, 7]);
    await i0.complete();
    expect((await Promise.all([a1, b1])).map((r) => r.id)).toEqual(['a1', 'b1']);
    // The padded execution: 1 inference, a batch of 2 as the model ran it.
    expect(executed).toEqual([
      [1, 1, 1],
      [1, 1, 2],
    ]);
  });
});
