import { describe, expect, it } from 'vitest';
import { DynamicBatchScheduler } from '../../engine/scheduling/dynamic-batch-scheduler.ts';
import type { ModelConfig } from '../../engine/api/model-config.ts';
import type { Clock } from '../../engine/scheduling/scheduler-queue.ts';
import type { InferRequest, InferResponse } from '../../engine/api/infer-request.ts';
import { InstancePool } from '../../engine/scheduling/instance-pool.ts';
import type { StatsSink } from '../../engine/api/scheduler.ts';
import { StatusError } from '../../engine/api/status.ts';
import { FakeClock, FakeInstance, flush } from '../fixtures/fake-scheduling.ts';

class Stats implements StatsSink {
  queuedNs: number[] = [];
  executions: Array<[number, number]> = [];
  okNs: number[] = [];
  bad = 0;
  queued(ns: number) {
    this.queuedNs.push(ns);
  }
  executed(b: number, n: number) {
    this.executions.push([b, n]);
  }
  succeeded(ns: number) {
    this.okNs.push(ns);
  }
  failed() {
    this.bad++;
  }
}

/** Triton's default scheduler: the dynamic batch scheduler with batching off (a model without dynamic_batching). */
function unbatched(opts: { pool: InstancePool; stats: StatsSink; clock?: Clock; maxBatchSize?: number }): DynamicBatchScheduler {
  const config: ModelConfig = { name: 'm', max_batch_size: opts.maxBatchSize ?? 0, input: [], output: [] };
  return new DynamicBatchScheduler({ modelName: 'm', config, pool: opts.pool, stats: opts.stats, clock: opts.clock, batching: false });
}

const req = (id: string, signal?: AbortSignal, shape = [1, 4]): InferRequest => ({
  modelName: 'm',
  id,
  inputs: [{ name: 'X', datatype: 'FP32', shape, data: new Uint8Array() }],
  outputs: [],
  parameters: {},
  signal,
});

function setup(n = 2, maxBatchSize?: number) {
  const clock = new FakeClock();
  const stats = new Stats();
  const instances = Array.from({ length: n }, (_, i) => new FakeInstance(`m_${i}`));
  const sched = unbatched({ pool: new InstancePool(instances), stats, clock, maxBatchSize });
  const results = new Map<string, InferResponse | StatusError>();
  const send = (r: InferRequest) =>
    void sched.enqueue(r).then(
      (x) => results.set(r.id!, x),
      (e) => results.set(r.id!, e),
    );
  return { clock, stats, instances, sched, results, send };
}
const codeOf = (x: unknown) => (x instanceof StatusError ? x.code : 'OK');

describe('DynamicBatchScheduler with batching off (default scheduler)', () => {
  it('runs each request alone, FIFO, on the next free instance', async () => {
    const t = setup(2);
    for (const id of ['a', 'b', 'c', 'd', 'e']) t.send(req(id));
    await flush();
    expect(t.instances.map((i) => i.batches)).toEqual([[['a']], [['b']]]);
    expect(t.sched.inflightCount()).toBe(5);
    t.clock.now += 300n;
    await t.instances[1]!.complete();
    expect(t.instances[1]!.batches).toEqual([['b'], ['c']]);
    await t.instances[0]!.complete();
    expect(t.instances[0]!.batches).toEqual([['a'], ['d']]);
    await t.instances[0]!.complete();
    await t.instances[1]!.complete();
    await t.instances[0]!.complete();
    expect(t.instances.flatMap((i) => i.batches).every((b) => b.length === 1)).toBe(true);
    expect([...t.results.keys()].sort()).toEqual(['a', 'b', 'c', 'd', 'e']);
    for (const [id, r] of t.results) expect((r as InferResponse).id).toBe(id);
    expect(t.stats.queuedNs).toEqual([0, 0, 300, 300, 300]);
    expect(t.stats.executions).toEqual(Array(5).fill([1, 1]));
    expect(t.sched.inflightCount()).toBe(0);
  });

  it('reports the request batch size when told the model batches', async () => {
    const t = setup(1, 8);
    t.send(req('a', undefined, [3, 4]));
    await flush();
    await t.instances[0]!.complete();
    expect(t.stats.executions).toEqual([[3, 1]]);
  });

  it('a request aborted while queued is rejected CANCELLED and never runs', async () => {
    const t = setup(1);
    t.send(req('a'));
    const ac = new AbortController();
    t.send(req('b', ac.signal));
    t.send(req('c'));
    await flush();
    ac.abort();
    await flush();
    expect(codeOf(t.results.get('b'))).toBe('CANCELLED');
    await t.instances[0]!.complete();
    await t.instances[0]!.complete();
    expect(t.instances[0]!.batches).toEqual([['a'], ['c']]);
  });

  it('an execute that throws or rejects fails only that request', async () => {
    const t = setup(1);
    t.send(req('a'));
    t.send(req('b'));
    await flush();
    await t.instances[0]!.fail(new StatusError('INVALID_ARG', 'bad input'));
    await t.instances[0]!.complete();
    expect(codeOf(t.results.get('a'))).toBe('INVALID_ARG');
    expect(codeOf(t.results.get('b'))).toBe('OK');

    const stats = new Stats();
    const s = unbatched({ pool: new InstancePool([new FakeInstance('x', true)]), stats });
    await expect(s.enqueue(req('z'))).rejects.toMatchObject({ code: 'INTERNAL' });
    expect(stats.bad).toBe(1);
  });

  it('stop() rejects new requests UNAVAILABLE and resolves when in-flight work is done', async () => {
    const t = setup(1);
    t.send(req('a'));
    t.send(req('b'));
    await flush();
    let stopped = false;
    void t.sched.stop().then(() => (stopped = true));
    await expect(t.sched.enqueue(req('c'))).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    await t.instances[0]!.complete();
    expect(stopped).toBe(false);
    await t.instances[0]!.complete();
    expect(stopped).toBe(true);
    expect(codeOf(t.results.get('b'))).toBe('OK');
  });
});
