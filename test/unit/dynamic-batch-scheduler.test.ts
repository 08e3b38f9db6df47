import { describe, expect, it } from 'vitest';
import { DynamicBatchScheduler } from '../../engine/scheduling/dynamic-batch-scheduler.ts';
import type { InferRequest, InferResponse } from '../../engine/api/infer-request.ts';
import { InstancePool } from '../../engine/scheduling/instance-pool.ts';
import type { DynamicBatching, ModelConfig } from '../../engine/api/model-config.ts';
import type { StatsSink } from '../../engine/api/scheduler.ts';
import { StatusError, unsupported } from '../../engine/api/status.ts';
import { FakeClock, FakeInstance, flush } from '../fixtures/fake-scheduling.ts';

const US = 1000n;

class Stats implements StatsSink {
  queuedNs: number[] = [];
  executions: Array<[number, number]> = [];
  ok = 0;
  bad = 0;
  queued(ns: number) {
    this.queuedNs.push(ns);
  }
  executed(batchSize: number, requestCount: number) {
    this.executions.push([batchSize, requestCount]);
  }
  succeeded() {
    this.ok++;
  }
  failed() {
    this.bad++;
  }
}

function req(
  id: string,
  opts: { shape?: number[]; datatype?: 'FP32' | 'INT32'; priority?: number; timeoutUs?: number; signal?: AbortSignal } = {},
): InferRequest {
  return {
    modelName: 'm',
    id,
    inputs: [{ name: 'INPUT0', datatype: opts.datatype ?? 'FP32', shape: opts.shape ?? [1, 4], data: new Uint8Array() }],
    outputs: [],
    parameters: {},
    priority: opts.priority,
    timeoutUs: opts.timeoutUs,
    signal: opts.signal,
  };
}

function setup(db: DynamicBatching, opts: { instances?: number; maxBatchSize?: number } = {}) {
  const clock = new FakeClock();
  const stats = new Stats();
  const instances = Array.from({ length: opts.instances ?? 1 }, (_, i) => new FakeInstance(`m_${i}`));
  const config: ModelConfig = { name: 'm', max_batch_size: opts.maxBatchSize ?? 8, input: [], output: [], dynamic_batching: db };
  const sched = new DynamicBatchScheduler({ modelName: 'm', config, pool: new InstancePool(instances), stats, clock });
  const results = new Map<string, InferResponse | StatusError>();
  const order: string[] = [];
  const send = (r: InferRequest) => {
    const p = sched.enqueue(r);
    p.then(
      (res) => (results.set(r.id!, res), order.push(r.id!)),
      (err) => (results.set(r.id!, err), order.push(r.id!)),
    );
    return p;
  };
  return { clock, stats, instances, sched, results, order, send };
}

const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);
const codeOf = (x: unknown) => (x instanceof StatusError ? x.code : 'OK');

describe('DynamicBatchScheduler batching', () => {
  it('16 concurrent requests on 2 busy instances run in a few batches', async () => {
    const t = setup({}, { instances: 2, maxBatchSize: 8 });
    for (const id of ids('r', 16)) void t.send(req(id));
    await flush();
    // r0 and r1 took both instances; the other 14 accumulate.
    expect(t.instances.map((i) => i.batches)).toEqual([[['r0']], [['r1']]]);
    await t.instances[0]!.complete();
    await t.instances[1]!.complete();
    expect(t.instances[0]!.batches[1]).toEqual(ids('r', 10).slice(2));
    expect(t.instances[1]!.batches[1]).toEqual(ids('r', 16).slice(10));
    await t.instances[0]!.complete();
    await t.instances[1]!.complete();
    expect(t.results.size).toBe(16);
    for (const [id, res] of t.results) expect((res as InferResponse).id).toBe(id);
    expect(t.stats.executions).toEqual([
      [1, 1],
      [1, 1],
      [8, 8],
      [6, 6],
    ]);
    expect(t.stats.ok).toBe(16);
    expect(t.stats.queuedNs).toHaveLength(16);
    expect(t.sched.inflightCount()).toBe(0);
  });

  it('sends as soon as a preferred batch size is reached', async () => {
    const t = setup({ preferred_batch_size: [4], max_queue_delay_microseconds: 1_000_000 });
    for (const id of ids('r', 3)) void t.send(req(id));
    await t.clock.advance(500n * US);
    expect(t.instances[0]!.batches).toEqual([]);
    void t.send(req('r3'));
    await flush();
    expect(t.instances[0]!.batches).toEqual([ids('r', 4)]);
  });

  it('sends a partial batch when the oldest request has waited max_queue_delay', async () => {
    const t = setup({ max_queue_delay_microseconds: 100 });
    void t.send(req('a'));
    await t.clock.advance(40n * US);
    void t.send(req('b'));
    await t.clock.advance(60n * US - 1n);
    expect(t.instances[0]!.batches).toEqual([]);
    await t.clock.advance(1n);
    expect(t.instances[0]!.batches).toEqual([['a', 'b']]);
    expect(t.stats.queuedNs).toEqual([100_000, 60_000]);
  });

  it('never batches requests with different shapes or datatypes', async () => {
    const t = setup({ max_queue_delay_microseconds: 0 });
    void t.send(req('first'));
    await flush(); // the instance is busy from now on
    void t.send(req('a1'));
    void t.send(req('a2'));
    void t.send(req('b1', { shape: [1, 3] }));
    void t.send(req('b2', { shape: [2, 3] })); // dim 0 may differ
    void t.send(req('c1', { datatype: 'INT32' }));
    void t.send(req('a3'));
    for (let i = 0; i < 5; i++) await t.instances[0]!.complete();
    expect(t.instances[0]!.batches).toEqual([['first'], ['a1', 'a2'], ['b1', 'b2'], ['c1'], ['a3']]);
    expect(t.stats.executions.slice(1)).toEqual([
      [2, 2],
      [3, 2],
      [1, 1],
      [1, 1],
    ]);
  });

  it('respects max_batch_size in sum of request batch sizes and rejects oversize requests', async () => {
    const t = setup({}, { maxBatchSize: 4 });
    await expect(t.sched.enqueue(req('huge', { shape: [5, 4] }))).rejects.toMatchObject({
      code: 'INVALID_ARG',
      message: expect.stringContaining("'m'"),
    });
    void t.send(req('first'));
    await flush();
    void t.send(req('x3', { shape: [3, 4] }));
    void t.send(req('y2', { shape: [2, 4] }));
    void t.send(req('z2', { shape: [2, 4] }));
    void t.send(req('w1'));
    for (let i = 0; i < 4; i++) await t.instances[0]!.complete();
    expect(t.instances[0]!.batches).toEqual([['first'], ['x3'], ['y2', 'z2'], ['w1']]);
    for (const [size] of t.stats.executions) expect(size).toBeLessThanOrEqual(4);
  });
});

describe('DynamicBatchScheduler queue policies', () => {
  it('max_queue_size rejects UNAVAILABLE at once', async () => {
    const t = setup({ default_queue_policy: { max_queue_size: 2 } });
    void t.send(req('running'));
    await flush();
    void t.send(req('q1'));
    void t.send(req('q2'));
    await expect(t.sched.enqueue(req('q3'))).rejects.toMatchObject({
      code: 'UNAVAILABLE',
      message: expect.stringContaining('Exceeds maximum queue size'),
    });
    expect(t.sched.inflightCount()).toBe(3);
    await t.instances[0]!.complete();
    await t.instances[0]!.complete();
    expect(t.instances[0]!.batches).toEqual([['running'], ['q1', 'q2']]);
  });

  it('REJECT: a request still queued after its timeout fails UNAVAILABLE on time, with no instance freeing', async () => {
    const t = setup({ default_queue_policy: { default_timeout_microseconds: 1000 } });
    void t.send(req('running'));
    await flush();
    void t.send(req('late'));
    await t.clock.advance(1000n * US);
    expect(t.results.has('late')).toBe(false);
    await t.clock.advance(1n);
    expect(codeOf(t.results.get('late'))).toBe('UNAVAILABLE');
    expect((t.results.get('late') as StatusError).message).toBe('Request timeout expired');
    expect(t.stats.bad).toBe(1);
    await t.instances[0]!.complete();
    expect(t.instances[0]!.batches).toEqual([['running']]);
  });

  it('a request timeout overrides the default only when allowed', async () => {
    const t = setup({ default_queue_policy: { default_timeout_microseconds: 10_000, allow_timeout_override: true } });
    void t.send(req('running'));
    await flush();
    void t.send(req('short', { timeoutUs: 100 }));
    void t.send(req('plain'));
    await t.clock.advance(101n * US);
    expect(codeOf(t.results.get('short'))).toBe('UNAVAILABLE');
    expect(t.results.has('plain')).toBe(false);

    const d = setup({ default_queue_policy: { default_timeout_microseconds: 10_000 } });
    void d.send(req('running'));
    await flush();
    void d.send(req('short', { timeoutUs: 100 }));
    await d.clock.advance(5000n * US);
    expect(d.results.has('short')).toBe(false);
  });

  it('DELAY: a timed-out request stays queued behind newer ones and still runs', async () => {
    const t = setup({ default_queue_policy: { timeout_action: 'DELAY', default_timeout_microseconds: 100 } }, { maxBatchSize: 1 });
    void t.send(req('running'));
    await flush();
    void t.send(req('old'));
    await t.clock.advance(150n * US);
    void t.send(req('new'));
    for (let i = 0; i < 3; i++) await t.instances[0]!.complete();
    expect(t.instances[0]!.batches).toEqual([['running'], ['new'], ['old']]);
    expect(codeOf(t.results.get('old'))).toBe('OK');
  });

  it('a higher priority request overtakes queued lower ones; out-of-range priority is INVALID_ARG', async () => {
    const t = setup({ priority_levels: 2, default_priority_level: 2 }, { maxBatchSize: 1 });
    void t.send(req('running'));
    await flush();
    void t.send(req('low1'));
    void t.send(req('low2', { priority: 2 }));
    void t.send(req('high', { priority: 1 }));
    await expect(t.sched.enqueue(req('bad', { priority: 3 }))).rejects.toMatchObject({ code: 'INVALID_ARG' });
    for (let i = 0; i < 4; i++) await t.instances[0]!.complete();
    expect(t.instances[0]!.batches.flat()).toEqual(['running', 'high', 'low1', 'low2']);
  });
});

describe('DynamicBatchScheduler delivery and lifecycle', () => {
  it('preserve_ordering delivers responses in accept order across instances', async () => {
    const t = setup({ preserve_ordering: true }, { instances: 2 });
    void t.send(req('r0'));
    void t.send(req('r1'));
    await flush();
    await t.instances[1]!.complete(); // r1 finishes first
    expect(t.order).toEqual([]);
    await t.instances[0]!.complete();
    expect(t.order).toEqual(['r0', 'r1']);

    const u = setup({ preserve_ordering: false }, { instances: 2 });
    void u.send(req('r0'));
    void u.send(req('r1'));
    await flush();
    await u.instances[1]!.complete();
    expect(u.order).toEqual(['r1']);
  });

  it('a request aborted while queued is removed and rejected CANCELLED', async () => {
    const t = setup({});
    void t.send(req('running'));
    await flush();
    const ac = new AbortController();
    void t.send(req('gone', { signal: ac.signal }));
    void t.send(req('stays'));
    ac.abort();
    await flush();
    expect(codeOf(t.results.get('gone'))).toBe('CANCELLED');
    await t.instances[0]!.complete();
    await t.instances[0]!.complete();
    expect(t.instances[0]!.batches).toEqual([['running'], ['stays']]);
    expect(t.sched.inflightCount()).toBe(0);
  });

  it('an execute that throws fails only its own batch, and the scheduler keeps working', async () => {
    const t = setup({}, { instances: 2 });
    void t.send(req('a'));
    void t.send(req('b'));
    await flush();
    await t.instances[0]!.fail(new Error('boom'));
    await t.instances[1]!.fail(unsupported('no such thing'));
    expect(codeOf(t.results.get('a'))).toBe('INTERNAL');
    expect(codeOf(t.results.get('b'))).toBe('UNSUPPORTED');
    void t.send(req('c'));
    await flush();
    await t.instances[0]!.complete();
    expect(codeOf(t.results.get('c'))).toBe('OK');
    expect(t.stats.bad).toBe(2);
    expect(t.stats.ok).toBe(1);
  });

  it('stop() rejects new work, sends queued requests without waiting, and resolves once drained', async () => {
    const t = setup({ max_queue_delay_microseconds: 10_000_000 });
    void t.send(req('a'));
    void t.send(req('b'));
    await flush();
    expect(t.instances[0]!.batches).toEqual([]); // waiting for the delay
    let stopped = false;
    void t.sched.stop().then(() => (stopped = true));
    await flush();
    expect(t.instances[0]!.batches).toEqual([['a', 'b']]);
    await expect(t.sched.enqueue(req('c'))).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(stopped).toBe(false);
    await t.instances[0]!.complete();
    expect(stopped).toBe(true);
    expect(t.stats.ok).toBe(2);
  });

  it('a decoupled instance free before its streams end serves the next request; each answers when its stream ends', async () => {
    const stats = new Stats();
    const ends: Array<(r: Array<InferResponse | StatusError>) => void> = [];
    const ran: string[] = [];
    const instance = {
      name: 'd_0',
      async execute(requests: InferRequest[]) {
        ran.push(...requests.map((r) => r.id!));
        const streams = new Promise<Array<InferResponse | StatusError>>((resolve) => ends.push(resolve));
        return { responses: [], timing: { computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0 }, streams };
      },
    };
    const config: ModelConfig = { name: 'd', max_batch_size: 0, input: [], output: [] };
    const sched = new DynamicBatchScheduler({
      modelName: 'd',
      config,
      pool: new InstancePool([instance]),
      stats,
      clock: new FakeClock(),
      batching: false,
    });
    const done: string[] = [];
    const a = sched.enqueue(req('a')).then((r) => done.push(r.id!));
    const b = sched.enqueue(req('b')).then((r) => done.push(r.id!));
    await flush();
    expect(ran).toEqual(['a', 'b']); // b ran while a's stream was still open
    expect(done).toEqual([]);
    ends[1]!([{ modelName: 'd', modelVersion: '1', id: 'b', outputs: [] }]);
    await b;
    ends[0]!([{ modelName: 'd', modelVersion: '1', id: 'a', outputs: [] }]);
    await a;
    expect(done).toEqual(['b', 'a']);
    expect(stats.ok).toBe(2);
    expect(sched.inflightCount()).toBe(0);
  });
});

describe('DynamicBatchScheduler on the system clock', () => {
  it('holds a lone request for a 500 us window, not a whole millisecond (Triton waits the window, to the microsecond)', async () => {
    const stats = new Stats();
    const instance = new FakeInstance('m_0');
    const config: ModelConfig = {
      name: 'm',
      max_batch_size: 8,
      input: [],
      output: [],
      dynamic_batching: { max_queue_delay_microseconds: 500 },
    };
    const sched = new DynamicBatchScheduler({ modelName: 'm', config, pool: new InstancePool([instance]), stats });
    // Timing on a shared machine: never early, and the best of ten within the window's millisecond.
    for (let i = 0; i < 10; i++) {
      const done = sched.enqueue(req(`r${i}`));
      while (instance.batches.length <= i) await new Promise((r) => setImmediate(r));
      await instance.complete();
      await done;
    }
    expect(stats.queuedNs).toHaveLength(10);
    expect(Math.min(...stats.queuedNs)).toBeGreaterThanOrEqual(500_000);
    expect(Math.min(...stats.queuedNs)).toBeLessThan(1_000_000);
  });
});
