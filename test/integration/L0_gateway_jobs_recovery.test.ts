// No silent job loss when Redis restarts empty (issue 13, finding 2): the
// Redis job queue notices the missing stream/group (NOGROUP), recreates it,
// and every job it accepts with 202 afterwards runs. Real engine, real
// gateway, a private redis-server restarted with no data.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEngine } from '../../engine/server/server.ts';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { setQuiet } from '../../common/logger.ts';
import { removeDir, tempRepo } from './helpers.ts';
import { TestRedis, waitFor } from './L0_gateway-support.ts';

type Engine = Awaited<ReturnType<typeof startEngine>>;
let repo: string;
let fnDir: string;
let engine: Engine;
let gw: RunningGateway;
let redis: TestRedis;

beforeAll(async () => {
  setQuiet(true);
  repo = tempRepo('gw-jobs-recovery', ['identity_bytes']);
  engine = await startEngine({ modelRepository: repo, grpcPort: 0, httpPort: -1, metricsPort: -1, host: '127.0.0.1' });
  fnDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-jobs-rec-fn-'));
  fs.writeFileSync(path.join(fnDir, 'echo_bytes.json'), JSON.stringify({ name: 'echo_bytes', target: { model: 'identity_bytes' } }));
  redis = await TestRedis.start();
  gw = await startGateway({
    port: 0,
    host: '127.0.0.1',
    engine: `127.0.0.1:${engine.grpcPort}`,
    functions: fnDir,
    shm: false,
    redisUrl: redis.url,
    redisNamespace: `rec${process.pid}`,
    leaseNamespace: `rec${process.pid}`,
  });
}, 120_000);

afterAll(async () => {
  await gw?.stop();
  await redis?.stop();
  await engine?.stop();
  removeDir(repo);
  removeDir(fnDir);
});

/** One async call; resolves with its job's final state (or 'accepted-but-never-ran'). */
async function asyncCall(): Promise<string> {
  const r = await fetch(`http://127.0.0.1:${gw.port}/fn/echo_bytes`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/octet-stream', Prefer: 'respond-async' },
    body: Buffer.from('hi'),
  });
  if (r.status !== 202) return `refused ${r.status}`;
  const { id } = (await r.json()) as { id: string };
  try {
    return await waitFor(
      'the job to finish',
      async () => {
        const j = (await (await fetch(`http://127.0.0.1:${gw.port}/jobs/${id}`)).json()) as { status?: string };
        return j.status === 'succeeded' || j.status === 'failed' ? j.status : undefined;
      },
      8000,
    );
  } catch {
    return 'accepted-but-never-ran';
  }
}

describe('a job released after a 503 (issue 41)', () => {
  it('runs again after its retry delay, not after the 30 s claim time', async () => {
    // The engine goes away: the job's call answers 503 ENGINE_UNAVAILABLE and the runner releases it (retry in 1 s).
    const port = engine.grpcPort;
    await engine.stop();
    const r = await fetch(`http://127.0.0.1:${gw.port}/fn/echo_bytes`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/octet-stream', Prefer: 'respond-async' },
      body: Buffer.from('later'),
    });
    expect(r.status).toBe(202);
    const { id } = (await r.json()) as { id: string };
    const job = async () => (await (await fetch(`http://127.0.0.1:${gw.port}/jobs/${id}`)).json()) as { status?: string };
    try {
      await waitFor(
        'a first run that failed with 503',
        async () => {
          const rec = await gw.jobs.get(id);
          return rec && rec.runs >= 1 && rec.state === 'queued';
        },
        10_000,
      );
    } finally {
      engine = await startEngine({ modelRepository: repo, grpcPort: port, httpPort: -1, metricsPort: -1, host: '127.0.0.1' });
    }
    const t0 = Date.now();
    // Before the fix the Redis queue left the entry pending until XAUTOCLAIM took it 30 s later.
    expect(
      await waitFor('the job to succeed', async () => ((await job()).status === 'succeeded' ? 'succeeded' : undefined), 15_000, 100),
    ).toBe('succeeded');
    expect(Date.now() - t0).toBeLessThan(15_000);
  }, 40_000);
});

describe('Redis restarted empty', () => {
  it('jobs run before, and every job accepted after a restart with no data runs too', async () => {
    expect(await asyncCall()).toBe('succeeded');
    await redis.stop();
    await redis.start(); // same port, no data: stream and consumer group are gone
    // The first calls may be refused (503) while the clients reconnect; none may be accepted and lost.
    const outcomes: string[] = [];
    for (let i = 0; i < 3; i++) outcomes.push(await asyncCall());
    expect(outcomes).not.toContain('accepted-but-never-ran');
    expect(outcomes.at(-1)).toBe('succeeded');
  });

  it('after FLUSHALL too', async () => {
    const c = new Redis(redis.url);
    await c.flushall();
    c.disconnect();
    expect(await asyncCall()).toBe('succeeded');
    expect(await asyncCall()).toBe('succeeded');
  });
});
