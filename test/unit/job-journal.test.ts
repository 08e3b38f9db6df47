// The gateway's journal of accepted jobs (gateway/jobs/job-journal.ts, issue
// 41) over a real RedisJobQueue on a private redis-server: bounded, emptied
// by final states, and after FLUSHALL it puts back exactly the jobs whose
// records are gone, once, with their ids and payloads.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobJournal } from '../../gateway/jobs/job-journal.ts';
import { RedisJobQueue } from '../../gateway/jobs/redis-job-queue.ts';
import { setQuiet } from '../../common/logger.ts';
import { TestRedis } from '../integration/L0_gateway-support.ts';

let redis: TestRedis;
let n = 0;
const journals: JobJournal[] = [];
const make = (maxEntries = 100) => {
  const ns = `jj${++n}`;
  const j = new JobJournal(new RedisJobQueue(redis.url, { namespace: ns }), redis.url, { namespace: ns, maxEntries, checkMs: 60_000 });
  journals.push(j);
  return j;
};

beforeAll(async () => {
  setQuiet(true);
  redis = await TestRedis.start();
});
afterAll(async () => {
  await Promise.all(journals.map((j) => j.close()));
  await redis?.stop();
});

describe('job journal', () => {
  it('keeps at most maxEntries, dropping the oldest', async () => {
    const j = make(3);
    for (let i = 0; i < 5; i++) await j.enqueue({ fn: 'f', payload: { i }, retentionMs: 60_000 });
    expect(j.size).toBe(3);
    expect(j.dropped).toBe(2);
  });

  it('forgets a job once a final state is written through it', async () => {
    const j = make();
    const rec = await j.enqueue({ fn: 'f', payload: { a: 1 }, retentionMs: 60_000 });
    const [t] = await j.take('c', 1, 100);
    expect(t!.id).toBe(rec.id);
    const running = await j.update(rec, 'running', { runs: 1 });
    expect(j.size).toBe(1);
    await j.update(running!, 'succeeded', { status: 200, result: {}, payload: undefined });
    expect(j.size).toBe(0);
  });

  it('after FLUSHALL puts back the queued jobs with their ids and payloads, once', async () => {
    const j = make();
    const a = await j.enqueue({ fn: 'f', payload: { a: 1 }, retentionMs: 60_000 });
    const b = await j.enqueue({ fn: 'f', payload: { b: 2 }, retentionMs: 60_000 });
    const raw = new Redis(redis.url);
    await raw.flushall();
    raw.disconnect();
    expect(await j.get(a.id)).toBeNull();
    await j.check();
    expect(j.restored).toBe(2);
    expect((await j.get(a.id))?.payload).toEqual({ a: 1 });
    expect((await j.get(b.id))?.payload).toEqual({ b: 2 });
    const taken = await j.take('c', 10, 100);
    expect(taken.map((t) => t.id).sort()).toEqual([a.id, b.id].sort());
    await j.check(); // the marker is back: nothing is put back twice
    expect(j.restored).toBe(2);
    expect(await j.take('c', 10, 50)).toEqual([]);
  });

  it('a job in hand when Redis lost its data writes its record back with its next update, and is not put back on the queue', async () => {
    const j = make();
    const rec = await j.enqueue({ fn: 'f', payload: { c: 3 }, retentionMs: 60_000 });
    await j.take('c', 1, 100);
    const running = await j.update(rec, 'running', { runs: 1 });
    const raw = new Redis(redis.url);
    await raw.flushall();
    raw.disconnect();
    await j.check();
    expect(j.restored).toBe(0);
    const done = await j.update(running!, 'succeeded', { status: 200, result: { ok: true }, payload: undefined });
    expect(done?.state).toBe('succeeded');
    expect((await j.get(rec.id))?.result).toEqual({ ok: true });
    expect(await j.take('c', 10, 50)).toEqual([]);
  });
});
