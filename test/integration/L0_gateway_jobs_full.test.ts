// The in-memory job store's bound through a real gateway and engine (issue
// 41): without Redis, a gateway whose store holds 3 records
// (`--job-records-max=3`), one runner and a JS model that takes 400 ms per
// run. Three async calls are accepted; the fourth, with only unfinished jobs
// in the store, is refused with 503 JOBS_FULL naming the bound and a
// Retry-After; once the first job has finished its record makes room and a
// new call is accepted. Every accepted job runs exactly once (one mark each);
// the refused one never runs. The store's own rules (which record goes
// first, the byte bound) are unit/memory-job-queue.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { startEngine } from '../../engine/server/server.ts';
import type { RunningGateway } from '../../gateway/server.ts';
import { JOBS_FULL_RETRY_AFTER_S } from '../../gateway/jobs/memory-job-queue.ts';
import { setQuiet } from '../../common/logger.ts';
import { removeDir } from './helpers.ts';
import { waitFor } from './L0_gateway-support.ts';
import { startMarkStack, submitMark } from './L0_jobs-support.ts';

type Engine = Awaited<ReturnType<typeof startEngine>>;
let dir: string;
let engine: Engine;
let gw: RunningGateway;
let readMarks: () => number[];

beforeAll(async () => {
  setQuiet(true);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-jobs-full-'));
  ({ engine, gw, readMarks } = await startMarkStack(dir, 400, { jobRecordsMax: 3 }));
}, 120_000);

afterAll(async () => {
  await gw?.stop();
  await engine?.stop();
  if (dir) removeDir(dir);
});

const submit = (i: number) => submitMark(gw.port, i);
const jobState = async (id: string) => {
  const r = await fetch(`http://127.0.0.1:${gw.port}/jobs/${id}`);
  return r.status === 200 ? ((await r.json()) as { status: string }).status : `http ${r.status}`;
};

describe('the in-memory job store full (issue 41)', () => {
  it('refuses a new async call with 503 JOBS_FULL and Retry-After while only unfinished jobs are held, takes it once one finished', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await submit(i);
      expect(r.status).toBe(202);
      ids.push(((await r.json()) as { id: string }).id);
    }
    const refused = await submit(99);
    const body = (await refused.json()) as { error: { code: string; message: string } };
    expect([refused.status, body.error.code]).toEqual([503, 'JOBS_FULL']);
    expect(body.error.message).toContain('3 records');
    expect(refused.headers.get('retry-after')).toBe(String(JOBS_FULL_RETRY_AFTER_S));
    // The first job finishes (400 ms): its record is the one that makes room.
    await waitFor('the first job to finish', async () => (await jobState(ids[0]!)) === 'succeeded', 10_000, 50);
    const again = await submit(3);
    expect(again.status).toBe(202);
    ids.push(((await again.json()) as { id: string }).id);
    await waitFor('every accepted job to run', () => readMarks().length >= 4, 15_000, 50);
    await new Promise((r) => setTimeout(r, 500)); // and none runs twice, the refused one never
    expect(readMarks()).toEqual([0, 1, 2, 3]);
    for (const id of ids.slice(1)) expect(await jobState(id)).toBe('succeeded');
  }, 60_000);
});
