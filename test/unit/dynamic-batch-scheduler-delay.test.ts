// The delayed-scheduler test hook (Triton's TRITONSERVER_DELAY_SCHEDULER, used
// by its L0_batcher): requests are held until N are queued, then batched as
// usual; later requests are not held. Pure scheduling on a fake clock.
import { describe, expect, it } from 'vitest';
import { DynamicBatchScheduler, delaySchedulerFromEnv } from '../../engine/scheduling/dynamic-batch-scheduler.ts';
import type { InferRequest } from '../../engine/api/infer-request.ts';
import { InstancePool } from '../../engine/scheduling/instance-pool.ts';
import type { ModelConfig } from '../../engine/api/model-config.ts';
import type { StatsSink } from '../../engine/api/scheduler.ts';
import { FakeClock, FakeInstance, flush } from '../fixtures/fake-scheduling.ts';

const stats: StatsSink = { queued() {}, executed() {}, succeeded() {}, failed() {} };
const req = (id: string): InferRequest => ({
  modelName: 'm',
  id,
  inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 4], data: new Uint8Array() }],
  outputs: [],
  parameters: {},
});

function setup(delayUntilQueued: number | undefined) {
  const instance = new FakeInstance('m_0');
  const config: ModelConfig = { name: 'm', max_batch_size: 8, input: [], output: [], dynamic_batching: {} };
  const sched = new DynamicBatchScheduler({
    modelName: 'm',
    config,
    pool: new InstancePool([instance]),
    stats,
    clock: new FakeClock(),
    delayUntilQueued,
  });
  return { instance, sched };
}

describe('dynamic batcher: the delayed-scheduler hook', () => {
  it('holds the first requests until 3 are queued, then runs them as one batch; later ones are not held', async () => {
    const { instance, sched } = setup(3);
    void sched.enqueue(req('a'));
    void sched.enqueue(req('b'));
    await flush();
    expect(instance.batches).toEqual([]);
    void sched.enqueue(req('c'));
    await flush();
    expect(instance.batches).toEqual([['a', 'b', 'c']]);
    await instance.complete();
    void sched.enqueue(req('d'));
    await flush();
    expect(instance.batches).toEqual([['a', 'b', 'c'], ['d']]);
    await instance.complete();
  });

  it('without the hook the first request runs alone at once', async () => {
    const { instance, sched } = setup(0);
    void sched.enqueue(req('a'));
    await flush();
    void sched.enqueue(req('b'));
    void sched.enqueue(req('c'));
    await flush();
    expect(instance.batches).toEqual([['a']]);
    await instance.complete();
    expect(instance.batches).toEqual([['a'], ['b', 'c']]);
    await instance.complete();
  });

  it('reads TRITONSERVER_DELAY_SCHEDULER as a positive count, anything else as none', () => {
    expect(delaySchedulerFromEnv({ TRITONSERVER_DELAY_SCHEDULER: '6' })).toBe(6);
    for (const v of [undefined, '', '0', '-2', '1.5', 'x']) expect(delaySchedulerFromEnv({ TRITONSERVER_DELAY_SCHEDULER: v })).toBe(0);
  });
});
