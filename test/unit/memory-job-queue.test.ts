// The in-memory job store's bounds (issue 41): a soak's async jobs, each kept
// for its function's resultTtlMs (an hour by default), grew the gateway's heap
// for as long as the soak ran. Past --job-records-max / --job-records-max-bytes
// the oldest finished records go first; only unfinished jobs left: JOBS_FULL.
import { describe, expect, it } from 'vitest';
import { GatewayError } from '../../gateway/core/errors.ts';
import { JobRunner } from '../../gateway/jobs/job-runner.ts';
import { isFinal, type JobRecord } from '../../gateway/jobs/job-state.ts';
import { approxBytes, MemoryJobQueue } from '../../gateway/jobs/memory-job-queue.ts';
import { parseArgs } from '../../gateway/main.ts';
import { waitFor } from '../integration/L0_gateway-support.ts';

const HOUR = 3_600_000;

/** Run `count` jobs one after another through a runner, checking the store's size after each. */
async function runJobs(q: MemoryJobQueue, count: number, result: (n: number) => unknown, each: () => void): Promise<JobRecord[]> {
  const runner = new JobRunner({ queue: q, consumer: 'r', concurrency: 1, invoke: async (_fn, p) => result((p as { n: number }).n) });
  runner.start();
  const recs: JobRecord[] = [];
  for (let n = 0; n < count; n++) {
    const rec = await q.enqueue({ fn: 'f', payload: { n }, retentionMs: HOUR });
    recs.push(rec);
    await waitFor(`job ${n} finished`, async () => {
      const r = await q.get(rec.id);
      return r !== null && isFinal(r.state, false);
    });
    each();
  }
  await runner.stop();
  return recs;
}

describe('in-memory job store bounds', () => {
  it('keeps at most maxRecords records within their retention, dropping the oldest finished first', async () => {
    const q = new MemoryJobQueue(Date.now, { maxRecords: 10 });
    let most = 0;
    const recs = await runJobs(
      q,
      40,
      (n) => ({ outputs: { y: n } }),
      () => (most = Math.max(most, q.size.records)),
    );
    expect(most).toBe(10);
    expect(q.size.records).toBe(10);
    expect(await q.get(recs[0]!.id)).toBeNull();
    expect(await q.get(recs[29]!.id)).toBeNull();
    expect(await q.get(recs[30]!.id)).toMatchObject({ state: 'succeeded', result: { outputs: { y: 30 } } });
    await q.close();
  });

  it('keeps the estimated bytes of its records under maxBytes', async () => {
    const big = (n: number) => ({ outputs: { scores: Array.from({ length: 1000 }, (_, i) => i + n) } }); // ~24 KB each by approxBytes
    const maxBytes = 100_000;
    const q = new MemoryJobQueue(Date.now, { maxBytes });
    let most = 0;
    const recs = await runJobs(q, 30, big, () => (most = Math.max(most, q.size.bytes)));
    expect(most).toBeLessThanOrEqual(maxBytes);
    expect(q.size.records).toBeGreaterThanOrEqual(3);
    expect(q.size.records).toBeLessThanOrEqual(4);
    expect(await q.get(recs[29]!.id)).toMatchObject({ state: 'succeeded' });
    await q.close();
  });

  it('refuses a new job with JOBS_FULL when only unfinished jobs are left, and takes it once one has finished', async () => {
    const q = new MemoryJobQueue(Date.now, { maxRecords: 3 });
    for (let n = 0; n < 3; n++) await q.enqueue({ fn: 'f', payload: { n }, retentionMs: HOUR });
    const refused = await q.enqueue({ fn: 'f', payload: { n: 3 }, retentionMs: HOUR }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(GatewayError);
    expect(refused).toMatchObject({ code: 'JOBS_FULL', status: 503 });
    expect((refused as GatewayError).message).toContain('3 records');
    expect((refused as GatewayError).headers).toEqual({ 'retry-after': '5' });
    expect(q.depth).toBe(3);
    const [taken] = await q.take('r', 1, 0);
    const rec = (await q.get(taken!.id))!;
    const running = (await q.update(rec, 'running'))!;
    await q.update(running, 'succeeded', { status: 200, result: { ok: true }, payload: undefined });
    await q.ack(taken!.entry);
    expect(q.size.records).toBe(3);
    const next = await q.enqueue({ fn: 'f', payload: { n: 4 }, retentionMs: HOUR });
    expect(q.size.records).toBe(3);
    expect(await q.get(rec.id)).toBeNull();
    expect(await q.get(next.id)).toMatchObject({ state: 'queued' });
    await q.close();
  });

  it('frees the bytes of expired records', async () => {
    let t = 0;
    const q = new MemoryJobQueue(() => t);
    await q.enqueue({ fn: 'f', payload: { body: 'x'.repeat(10_000) }, retentionMs: 100 });
    expect(q.size.bytes).toBeGreaterThan(10_000);
    t = 1000;
    expect(await q.recent(10)).toEqual([]);
    expect(q.size).toEqual({ records: 0, bytes: 0 });
    await q.close();
  });

  it('counts strings by length and numbers by 8 bytes', () => {
    expect(approxBytes('abcd')).toBe(4);
    expect(approxBytes([1, 2])).toBe(2 * (16 + 8));
    expect(approxBytes({ body: 'x'.repeat(100) })).toBe(16 + 4 + 100);
    expect(approxBytes(undefined)).toBe(8);
  });

  it('takes its bounds from --job-records-max and --job-records-max-bytes', () => {
    expect(parseArgs(['--job-records-max=2000', '--job-records-max-bytes=1048576'], {})).toMatchObject({
      jobRecordsMax: 2000,
      jobRecordsMaxBytes: 1048576,
    });
  });
});
