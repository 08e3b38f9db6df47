// What the gateways keep in Redis, across stops and data loss (issue 21,
// finding 8), on the real engine and a private redis-server:
//  - a gateway process stopped with SIGTERM deregisters itself: its presence
//    member and job consumer are gone when it exits, with no other gateway
//    around to reap it;
//  - after Redis loses its data (restarted empty, or FLUSHALL) the running
//    gateways re-seed it with the bundle they serve and its rollback
//    history: rollback still works, and a gateway started afterwards serves
//    the deployed bundle, not its own functions folder.
// The two run at the same time, each on a Redis of its own (the second stops
// and empties its); the in-process gateways re-read the deployed version every
// 250 ms (deployPollMs) instead of 5 s, which is what finds a FLUSHALL.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { setQuiet } from '../../common/logger.ts';
import { TestRedis, waitFor } from './L0_gateway-support.ts';
import { ROOT, removeDir, startTestEngine, tempRepo } from './helpers.ts';

type Json = Record<string, any>;
const TOKEN = 'redis-state-admin';
const NS = `rs${process.pid}`;

let engine: Awaited<ReturnType<typeof startTestEngine>>;
let redis: TestRedis;
let repo: string;
let fnDir: string;
const gateways: RunningGateway[] = [];
const savedToken = process.env.GATEWAY_ADMIN_TOKEN;

const V2 = { version: 'v-two', functions: [{ name: 'calc', target: { model: 'simple' }, outputs: { sum: 'OUTPUT0', diff: 'OUTPUT1' } }] };
const V3 = {
  version: 'v-three',
  functions: [
    { name: 'calc', target: { model: 'simple' }, outputs: { diff: 'OUTPUT1' } },
    { name: 'echo', target: { model: 'js_echo' } },
  ],
};
const admin = (g: RunningGateway, method: string, p: string, body?: unknown) =>
  fetch(`http://127.0.0.1:${g.port}${p}`, {
    method,
    headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
const activeVersion = async (g: RunningGateway) => ((await (await admin(g, 'GET', '/admin/functions')).json()) as Json).version as string;

async function gateway(): Promise<RunningGateway> {
  const g = await startGateway({
    port: 0,
    host: '127.0.0.1',
    engine: `127.0.0.1:${engine.grpcPort}`,
    functions: fnDir,
    shm: false,
    redisUrl: redis.url,
    redisNamespace: NS,
    leaseNamespace: NS,
    console: false,
    deployPollMs: 250,
  });
  gateways.push(g);
  return g;
}

/** The deploy history in Redis, oldest first (empty when Redis lost it). */
async function storedHistory(): Promise<string[]> {
  const c = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  try {
    return await c.lrange(`${NS}:deploy:history`, 0, -1);
  } finally {
    c.disconnect();
  }
}

beforeAll(async () => {
  setQuiet(true);
  process.env.GATEWAY_ADMIN_TOKEN = TOKEN;
  repo = tempRepo('gw-redis-state', ['simple', 'js_echo']);
  engine = await startTestEngine({ modelRepository: repo, httpPort: -1, metricsPort: -1 });
  redis = await TestRedis.start();
  fnDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-redis-state-fn-'));
  fs.writeFileSync(
    path.join(fnDir, 'calc.json'),
    JSON.stringify({ name: 'calc', target: { model: 'simple' }, outputs: { sum: 'OUTPUT0' } }),
  );
}, 120_000);

afterAll(async () => {
  if (savedToken === undefined) delete process.env.GATEWAY_ADMIN_TOKEN;
  else process.env.GATEWAY_ADMIN_TOKEN = savedToken;
  await Promise.allSettled(gateways.map((g) => g.stop()));
  await redis?.stop();
  await engine?.stop();
  removeDir(repo);
  removeDir(fnDir);
});

describe('a gateway stopped with SIGTERM', { concurrent: true }, () => {
  it('deregisters itself from Redis on the way out', async ({ expect, onTestFinished }) => {
    const ns = `${NS}sig`;
    const own = await TestRedis.start();
    onTestFinished(() => own.stop());
    const proc = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        'gateway/main.ts',
        '--port=0',
        '--host=127.0.0.1',
        `--engine=127.0.0.1:${engine.grpcPort}`,
        `--functions=${fnDir}`,
        `--redis-url=${own.url}`,
        `--redis-namespace=${ns}`,
        `--lease-namespace=${ns}`,
        '--shm=false',
        '--console=false',
      ],
      { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] },
    );
    let log = '';
    proc.stderr!.on('data', (d: Buffer) => (log += d.toString()));
    const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
    const ownerId = await new Promise<string>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`gateway did not start:\n${log}`)), 60_000);
      proc.on('message', (m: { ready?: boolean; ownerId: string }) => {
        if (m.ready) {
          clearTimeout(t);
          resolve(m.ownerId);
        }
      });
    });
    const c = new Redis(own.url);
    try {
      const members = async () => [...(await c.zrange(`${ns}:gateways`, '0', '-1')), ...(await c.zrange(`${ns}:gateways:dead`, '0', '-1'))];
      expect((await members()).some((m) => m.startsWith(`${ownerId} `))).toBe(true);
      proc.kill('SIGTERM');
      expect(await exited, log).toBe(0);
      // No other gateway ran a reap pass: what is gone, the stopping gateway removed itself.
      expect(await members()).toEqual([]);
      const consumers = (await c.call('XINFO', 'CONSUMERS', `${ns}:jobs:stream`, 'runners').catch(() => [])) as unknown[][];
      expect(consumers.map((x) => String(x[1]))).not.toContain(ownerId);
    } finally {
      c.disconnect();
      if (proc.exitCode === null) proc.kill('SIGKILL');
    }
  }, 90_000);
});

describe('Redis loses its data', { concurrent: true }, () => {
  it('the running gateways re-seed the active bundle and its history; rollback works; a new gateway serves the deployed bundle', async ({
    expect,
  }) => {
    const A = await gateway();
    const B = await gateway();
    const seed = await activeVersion(A);
    expect((await admin(A, 'PUT', '/admin/functions', V2)).status).toBe(200);
    expect((await admin(A, 'PUT', '/admin/functions', V3)).status).toBe(200);
    await waitFor('B runs v-three', async () => (await activeVersion(B)) === 'v-three', 10_000, 100);
    expect(await storedHistory()).toEqual([seed, 'v-two', 'v-three']);

    await redis.stop();
    await redis.start(); // same port, no data
    await waitFor('Redis re-seeded', async () => (await storedHistory()).length > 0, 20_000, 100);
    expect(await storedHistory()).toEqual([seed, 'v-two', 'v-three']);
    expect(await activeVersion(A)).toBe('v-three');
    expect(await activeVersion(B)).toBe('v-three');

    // A gateway that starts now finds the deployed bundle, not its own folder's.
    const C = await gateway();
    expect(await activeVersion(C)).toBe('v-three');

    // The history is whole again: rollback goes to v-two everywhere.
    const rb = await admin(B, 'POST', '/admin/functions/rollback');
    expect(rb.status).toBe(200);
    await waitFor(
      'A and C follow the rollback',
      async () => (await activeVersion(A)) === 'v-two' && (await activeVersion(C)) === 'v-two',
      10_000,
      100,
    );

    // FLUSHALL (no reconnect): found by the periodic check.
    const c = new Redis(redis.url);
    await c.flushall();
    c.disconnect();
    await waitFor('Redis re-seeded after FLUSHALL', async () => (await storedHistory()).length > 0, 20_000, 100);
    expect(await storedHistory()).toEqual([seed, 'v-two']);
    const call = await fetch(`http://127.0.0.1:${A.port}/fn/calc`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ inputs: { INPUT0: Array.from({ length: 16 }, () => 5), INPUT1: Array.from({ length: 16 }, () => 2) } }),
    });
    expect(call.status).toBe(200);
    expect(Object.keys(((await call.json()) as Json).outputs).sort()).toEqual(['diff', 'sum']); // v-two's calc
  }, 120_000);
});
