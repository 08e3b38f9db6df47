import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IllegalTransition } from '../../common/lifecycle.ts';
import { Redis } from 'ioredis';
import type { JobQueue } from '../../gateway/jobs/job-queue.ts';
import { JobCallError, JobRunner } from '../../gateway/jobs/job-runner.ts';
import { JOB_STATES, canTransition, isFinal, publicView, transition, type JobRecord } from '../../gateway/jobs/job-state.ts';
import { MemoryJobQueue } from '../../gateway/jobs/memory-job-queue.ts';
import { RedisJobQueue } from '../../gateway/jobs/redis-job-queue.ts';
import { GatewayError } from '../../gateway/core/errors.ts';
import { FunctionDefinitionSchema } from '../../gateway/calls/function-schema.ts';
import { checkJobAccess, isJobId, jobKeyHash, newJobId } from '../../gateway/jobs/job-access.ts';
import { TestRedis, waitFor } from '../integration/L0_gateway-support.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('job lifecycle', () => {
  it('allows exactly the documented moves', () => {
    const legal = new Set([
      'queued>running',
      'running>succeeded',
      'running>failed',
      'running>queued',
      'succeeded>delivering',
      'failed>delivering',
      'delivering>delivered',
      'delivering>dead',
    ]);
    for (const a of JOB_STATES) for (const b of JOB_STATES) expect(canTransition(a, b), `${a}>${b}`).toBe(legal.has(`${a}>${b}`));
  });

  it('an illegal move throws INTERNAL naming from and to', () => {
    expect(transition('queued', 'running')).toBe('running');
    let err: unknown;
    try {
      transition('delivered', 'running', 'j1');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(IllegalTransition);
    expect((err as IllegalTransition).code).toBe('INTERNAL');
    expect((err as Error).message).toBe('job j1: illegal transition from delivered to running');
  });

  it('final states depend on whether a callback is due; the public view hides the payload', () => {
    expect(isFinal('succeeded', false)).toBe(true);
    expect(isFinal('succeeded', true)).toBe(false);
    expect(isFinal('dead', true)).toBe(true);
    const rec: JobRecord = {
      id: 'a',
      fn: 'f',
      state: 'failed',
      rev: 3,
      createdAt: 0,
      updatedAt: 1,
      retentionMs: 1000,
      payload: { secret: 1 },
      runs: 1,
      attempts: 0,
      status: 400,
      result: { error: { code: 'X', message: 'm' } },
    };
    const v = publicView(rec);
    expect(v).toMatchObject({ id: 'a', status: 'failed', outcome: 'failed', error: { code: 'X', message: 'm' } });
    expect(JSON.stringify(v)).not.toContain('secret');
  });
});

describe('job access', () => {
  const keyed = FunctionDefinitionSchema.parse({ name: 'f', target: { model: 'm' }, auth: { apiKeyEnv: ['K'] } });
  const open = FunctionDefinitionSchema.parse({ name: 'f', target: { model: 'm' } });
  const env = { K: 'alice,bob' };
  const code = (f: () => void) => {
    try {
      f();
      return 'ok';
    } catch (e) {
      return (e as GatewayError).code;
    }
  };

  it('ids: 144 random bits as base64url; the id pattern admits them and the older UUIDs, nothing with / . % or space', () => {
    const ids = Array.from({ length: 200 }, newJobId);
    expect(new Set(ids).size).toBe(200);
    for (const id of ids) expect(id).toMatch(/^[A-Za-z0-9_-]{24}$/);
    expect(isJobId(crypto.randomUUID())).toBe(true);
    for (const bad of ['', 'a/b', '..', 'a b', 'x%2F', 'a'.repeat(65)]) expect(isJobId(bad)).toBe(false);
  });

  it('the key hash depends on the job: the same key gives different values per job, and never contains the key', () => {
    expect(jobKeyHash('j1', 'alice')).not.toBe(jobKeyHash('j2', 'alice'));
    expect(jobKeyHash('j1', 'alice')).toBe(jobKeyHash('j1', 'alice'));
    expect(jobKeyHash('j1', 'alice')).not.toContain('alice');
  });

  it('a job with a key hash needs that key, still accepted; one without needs a key the function accepts now', () => {
    const made = { id: 'j1', keyHash: jobKeyHash('j1', 'alice') };
    expect(code(() => checkJobAccess(made, 'alice', keyed, env))).toBe('ok');
    expect(code(() => checkJobAccess(made, undefined, keyed, env))).toBe('JOB_KEY_MISSING');
    expect(code(() => checkJobAccess(made, 'bob', keyed, env))).toBe('JOB_KEY_INVALID');
    expect(code(() => checkJobAccess(made, 'alice', keyed, { K: 'bob' }))).toBe('JOB_KEY_INVALID'); // revoked
    expect(code(() => checkJobAccess(made, 'alice', undefined, env))).toBe('ok'); // function since removed: the hash decides
    expect(code(() => checkJobAccess({ ...made, keyHash: 'short' }, 'alice', keyed, env))).toBe('JOB_KEY_INVALID');
    // An inbound webhook's job (no key hash) of a function with auth: any key the function accepts now.
    expect(code(() => checkJobAccess({ id: 'j2' }, 'bob', keyed, env))).toBe('ok');
    expect(code(() => checkJobAccess({ id: 'j2' }, undefined, keyed, env))).toBe('JOB_KEY_MISSING');
    expect(code(() => checkJobAccess({ id: 'j2' }, 'eve', keyed, env))).toBe('JOB_KEY_INVALID');
    // No auth anywhere: the id is enough.
    expect(code(() => checkJobAccess({ id: 'j3' }, undefined, open, env))).toBe('ok');
  });
});

/** Contract tests run against both queues. */
function queueContract(name: string, make: () => Promise<JobQueue>) {
  describe(`${name} job queue`, () => {
    it('enqueue, take, guarded update (compare-and-set on rev), ack', async () => {
      const q = await make();
      const rec = await q.enqueue({ fn: 'f', payload: { x: 1 }, retentionMs: 60_000 });
      expect(rec.state).toBe('queued');
      const taken = await q.take('c1', 10, 200);
      expect(taken.map((t) => t.id)).toContain(rec.id);
      const running = await q.update(rec, 'running', { runs: 1 });
      expect(running).toMatchObject({ state: 'running', rev: 2, runs: 1 });
      expect(await q.update(rec, 'running')).toBeNull(); // stale rev loses
      await expect(q.update(running!, 'delivered')).rejects.toThrow(/from running to delivered/);
      const done = await q.update(running!, 'succeeded', { status: 200, result: { ok: 1 }, payload: undefined });
      expect(done!.payload).toBeUndefined();
      expect(await q.get(rec.id)).toMatchObject({ state: 'succeeded', result: { ok: 1 }, rev: 3 });
      await q.ack(taken.find((t) => t.id === rec.id)!.entry);
      expect(await q.take('c1', 10, 50)).toEqual([]);
      expect(await q.get('nope')).toBeNull();
      await q.close();
    });

    it('recent lists retained jobs newest first (the console job list)', async () => {
      const q = await make();
      const pause = () => new Promise((r) => setTimeout(r, 3));
      const a = await q.enqueue({ fn: 'f', payload: {}, retentionMs: 60_000 });
      await pause();
      const b = await q.enqueue({ fn: 'g', payload: {}, retentionMs: 60_000 });
      await pause();
      await q.enqueue({ fn: 'h', payload: {}, retentionMs: 20 });
      await new Promise((r) => setTimeout(r, 60));
      const ids = (await q.recent(10)).map((r) => r.id);
      expect(ids.indexOf(b.id)).toBeLessThan(ids.indexOf(a.id));
      expect(ids.indexOf(a.id)).toBeGreaterThanOrEqual(0);
      expect((await q.recent(10)).some((r) => r.fn === 'h')).toBe(false); // past its retention
      expect(await q.recent(1)).toHaveLength(1);
      await q.close();
    });
  });
}

queueContract('memory', async () => new MemoryJobQueue());

describe('job runner on the memory queue', () => {
  it('runs every job with bounded concurrency and records outcomes', async () => {
    const q = new MemoryJobQueue();
    let now = 0;
    let peak = 0;
    const runner = new JobRunner({
      queue: q,
      consumer: 'r1',
      concurrency: 3,
      invoke: async (_fn, payload) => {
        now++;
        peak = Math.max(peak, now);
        await sleep(20);
        now--;
        const n = (payload as { n: number }).n;
        if (n % 5 === 0) throw new JobCallError(400, { error: { code: 'INPUT_INVALID', message: `bad ${n}` } });
        return { outputs: { y: n * 2 } };
      },
    });
    runner.start();
    const recs = await Promise.all(Array.from({ length: 12 }, (_, n) => q.enqueue({ fn: 'double', payload: { n }, retentionMs: 60_000 })));
    const final = await waitFor('all jobs finished', async () => {
      const all = await Promise.all(recs.map((r) => q.get(r.id)));
      return all.every((r) => r && isFinal(r.state, false)) ? all : undefined;
    });
    await runner.stop();
    expect(peak).toBe(3);
    final.forEach((r, n) => {
      if (n % 5 === 0) expect(r).toMatchObject({ state: 'failed', status: 400, result: { error: { message: `bad ${n}` } } });
      else expect(r).toMatchObject({ state: 'succeeded', status: 200, result: { outputs: { y: n * 2 } }, runs: 1 });
      expect(r!.payload).toBeUndefined();
    });
    await q.close();
  });

  it('a 503 puts the job back in the queue; a callback job goes through delivering to delivered or dead', async () => {
    const q = new MemoryJobQueue();
    let calls = 0;
    const seen: Array<[string, unknown]> = [];
    const runner = new JobRunner({
      queue: q,
      consumer: 'r1',
      retryDelayMs: 20,
      invoke: async () => {
        if (++calls === 1) throw new GatewayError('ENGINE_UNAVAILABLE', { address: 'x' });
        return { outputs: 'ok' };
      },
      deliver: async (job, body, onAttempt) => {
        seen.push([job.callback!.url, body]);
        if (job.callback!.url.endsWith('/bad')) {
          await onAttempt(1, 'HTTP 500');
          return { delivered: false, attempts: 2, lastError: 'HTTP 500' };
        }
        return { delivered: true, attempts: 1 };
      },
    });
    runner.start();
    const cb = (url: string) => ({ url, maxAttempts: 2, backoffMs: 1, maxBackoffMs: 1, attemptTimeoutMs: 100 });
    const good = await q.enqueue({ fn: 'f', payload: {}, retentionMs: 60_000, callback: cb('http://r/good') });
    const bad = await q.enqueue({ fn: 'f', payload: {}, retentionMs: 60_000, callback: cb('http://r/bad') });
    await waitFor('both delivered or dead', async () => {
      const [a, b] = [await q.get(good.id), await q.get(bad.id)];
      return a && b && isFinal(a.state, true) && isFinal(b.state, true);
    });
    await runner.stop();
    expect(await q.get(good.id)).toMatchObject({ state: 'delivered', attempts: 1, runs: 2, result: { outputs: 'ok' } });
    expect(await q.get(bad.id)).toMatchObject({ state: 'dead', attempts: 2, lastError: 'HTTP 500' });
    expect(seen.every(([, b]) => JSON.stringify(b) === '{"outputs":"ok"}')).toBe(true);
    await q.close();
  });

  it('records expire after their retention time', async () => {
    let t = 1000;
    const q = new MemoryJobQueue(() => t);
    const r = await q.enqueue({ fn: 'f', payload: {}, retentionMs: 500 });
    expect(await q.get(r.id)).not.toBeNull();
    t += 501;
    expect(await q.get(r.id)).toBeNull();
    await q.close();
  });
});

describe('redis job queue', () => {
  let redis: TestRedis;
  let n = 0;
  const queues: RedisJobQueue[] = [];
  const make = async () => {
    const q = new RedisJobQueue(redis.url, { namespace: `t${++n}` });
    queues.push(q);
    return q;
  };
  beforeAll(async () => {
    redis = await TestRedis.start();
  });
  afterAll(async () => {
    await Promise.all(queues.map((q) => q.close()));
    await redis?.stop();
  });

  queueContract('redis', make);

  it('keeps records in a hash with a TTL of the retention time, and entries in a stream until acked', async () => {
    const q = await make();
    const raw = new Redis(redis.url);
    const rec = await q.enqueue({ fn: 'f', payload: { a: 1 }, retentionMs: 5000 });
    const ttl = await raw.pttl(`t${n}:job:${rec.id}`);
    expect(ttl).toBeGreaterThan(4000);
    expect(ttl).toBeLessThanOrEqual(5000);
    expect(await raw.xlen(`t${n}:jobs:stream`)).toBe(1);
    const [t] = await q.take('c', 1, 100);
    expect(await q.pendingCount()).toBe(1);
    await q.ack(t!.entry);
    expect(await q.pendingCount()).toBe(0);
    expect(await raw.xlen(`t${n}:jobs:stream`)).toBe(0);
    raw.disconnect();
  });

  it('a job held by a dead runner is reclaimed after the idle time and finished by another', async () => {
    const q = await make();
    const rec = await q.enqueue({ fn: 'f', payload: { v: 7 }, retentionMs: 60_000 });
    // Runner "dead" takes it, marks it running and never comes back.
    const [t] = await q.take('dead', 1, 100);
    await q.update((await q.get(t!.id))!, 'running', { runs: 1 });
    expect(await q.reclaim('live', 300, 10)).toEqual([]); // not idle long enough yet
    const runner = new JobRunner({ queue: q, consumer: 'live', claimIdleMs: 300, pollMs: 100, invoke: async (_f, p) => ({ got: p }) });
    runner.start();
    const done = await waitFor(
      'reclaimed job finished',
      async () => {
        const r = await q.get(rec.id);
        return r?.state === 'succeeded' ? r : undefined;
      },
      5000,
    );
    await runner.stop();
    expect(done).toMatchObject({ result: { got: { v: 7 } }, runs: 2 });
    expect(await q.pendingCount()).toBe(0);
  });

  it('a live runner’s heartbeat keeps its job from being reclaimed', async () => {
    const q = await make();
    await q.enqueue({ fn: 'slow', payload: {}, retentionMs: 60_000 });
    let calls = 0;
    const runner = new JobRunner({
      queue: q,
      consumer: 'A',
      claimIdleMs: 150,
      pollMs: 50,
      invoke: async () => {
        calls++;
        await sleep(600);
        return {};
      },
    });
    runner.start();
    await waitFor('job started', () => calls === 1);
    const q2 = new RedisJobQueue(redis.url, { namespace: `t${n}` }); // same namespace: another replica
    queues.push(q2);
    for (let i = 0; i < 5; i++) {
      expect(await q2.reclaim('B', 150, 10)).toEqual([]);
      await sleep(100);
    }
    await runner.stop();
    expect(calls).toBe(1);
  });
});
