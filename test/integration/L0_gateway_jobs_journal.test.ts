// No accepted job lost when Redis restarts empty (issue 41): a real engine
// with a slow JS model that writes a mark per run to a file, a gateway with
// one runner, and a private redis-server with no persistence. N jobs are
// accepted (202), then Redis is killed and started again empty before most
// of them ran. The gateway's journal notices (its epoch marker is gone) and
// puts the jobs back with their ids: every job runs exactly once (one mark
// each, no second one later), and those not finished before the loss report
// their result at GET /jobs/<id>. Without the journal the queued jobs were
// gone with Redis and never ran.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { startEngine } from '../../engine/server/server.ts';
import type { RunningGateway } from '../../gateway/server.ts';
import { setQuiet } from '../../common/logger.ts';
import { removeDir } from './helpers.ts';
import { TestRedis, waitFor } from './L0_gateway-support.ts';
import { startMarkStack, submitMark } from './L0_jobs-support.ts';

type Engine = Awaited<ReturnType<typeof startEngine>>;
let dir: string;
let engine: Engine;
let gw: RunningGateway;
let redis: TestRedis;
let readMarks: () => number[];
const N = 8;

beforeAll(async () => {
  setQuiet(true);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-jobs-journal-'));
  redis = await TestRedis.start();
  ({ engine, gw, readMarks } = await startMarkStack(dir, 300, {
    redisUrl: redis.url,
    redisNamespace: `jrn${process.pid}`,
    leaseNamespace: `jrn${process.pid}`,
  }));
}, 120_000);

afterAll(async () => {
  await gw?.stop();
  await redis?.stop();
  await engine?.stop();
  if (dir) removeDir(dir);
});

describe('Redis restarted empty with accepted jobs not yet run (issue 41)', () => {
  it('every accepted job runs exactly once, put back from the gateway journal', async () => {
    const ids: string[] = [];
    for (let i = 0; i < N; i++) {
      const r = await submitMark(gw.port, i);
      expect(r.status).toBe(202);
      ids.push(((await r.json()) as { id: string }).id);
    }
    await redis.stop();
    const ranBefore = readMarks().length;
    expect(ranBefore).toBeLessThan(N / 2); // most jobs had not run when Redis lost them
    await redis.start(); // same port, no data
    await waitFor('every job to run', () => readMarks().length >= N, 30_000, 100);
    await new Promise((r) => setTimeout(r, 2000)); // and none runs a second time
    expect(readMarks()).toEqual(Array.from({ length: N }, (_, i) => i));
    // Jobs that had not finished before the loss report their result from the restored record.
    const states = await Promise.all(
      ids.map(async (id) => {
        const r = await fetch(`http://127.0.0.1:${gw.port}/jobs/${id}`);
        return r.status === 200 ? ((await r.json()) as { status: string }).status : `http ${r.status}`;
      }),
    );
    expect(states.filter((s) => s === 'succeeded').length).toBeGreaterThanOrEqual(N - ranBefore - 1);
  }, 60_000);
});
