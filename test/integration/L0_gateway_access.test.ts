// Who can read what (issue 21, finding 1) on the real engine, real gateways
// and a private redis-server: an async job of a function with an API key is
// readable only with the key its call was made with (in Redis and in
// memory; the key itself is never stored), job ids carry at least 128
// random bits, and without a console token the console and its API answer
// loopback clients only, judged by the connection (a client on the host's
// network address gets 403 whatever X-Forwarded-For says); the job list
// shows ids and states, never results.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { setQuiet } from '../../common/logger.ts';
import { TestRedis, waitFor } from './L0_gateway-support.ts';
import { removeDir, startTestEngine, tempRepo } from './helpers.ts';

type Json = Record<string, any>;
const NS = `acc${process.pid}`;
/** This host's first non-loopback IPv4 address: a client there is "another host" to the gateway. */
const HOST_ADDR = Object.values(os.networkInterfaces())
  .flat()
  .find((i) => i && i.family === 'IPv4' && !i.internal)?.address;

let engine: Awaited<ReturnType<typeof startTestEngine>>;
let redis: TestRedis;
let repo: string;
let fnDir: string;
let R: RunningGateway; // Redis job queue, listening on all interfaces
let M: RunningGateway; // in-memory job queue
const saved = { ...process.env };

const at = (g: RunningGateway, p: string, host = '127.0.0.1') => `http://${host}:${g.port}${p}`;
const call = (g: RunningGateway, fn: string, headers: Record<string, string> = {}) =>
  fetch(at(g, `/fn/${fn}`), {
    method: 'POST',
    headers: { 'Content-Type': 'application/octet-stream', Prefer: 'respond-async', ...headers },
    body: Buffer.from('secret-result'),
  });
const readJob = async (g: RunningGateway, id: string, headers: Record<string, string> = {}) => {
  const r = await fetch(at(g, `/jobs/${id}`), { headers });
  return { status: r.status, body: (await r.json()) as Json };
};
const finished = (g: RunningGateway, id: string, headers: Record<string, string>) =>
  waitFor(
    'the job to finish',
    async () => {
      const j = await readJob(g, id, headers);
      return j.body.status === 'succeeded' || j.body.status === 'failed' ? j.body : undefined;
    },
    15_000,
  );

beforeAll(async () => {
  setQuiet(true);
  process.env.ACCESS_KEYS = 'key-alice, key-bob';
  delete process.env.GATEWAY_CONSOLE_TOKEN;
  repo = tempRepo('gw-access', ['identity_bytes']);
  engine = await startTestEngine({ modelRepository: repo, httpPort: -1, metricsPort: -1 });
  redis = await TestRedis.start();
  fnDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-access-fn-'));
  fs.writeFileSync(
    path.join(fnDir, 'keyed_bytes.json'),
    JSON.stringify({ name: 'keyed_bytes', target: { model: 'identity_bytes' }, auth: { apiKeyEnv: ['ACCESS_KEYS'] } }),
  );
  fs.writeFileSync(path.join(fnDir, 'open_bytes.json'), JSON.stringify({ name: 'open_bytes', target: { model: 'identity_bytes' } }));
  const common = { port: 0, engine: `127.0.0.1:${engine.grpcPort}`, functions: fnDir, shm: false, consoleSampleMs: 60_000 };
  R = await startGateway({ ...common, host: '0.0.0.0', redisUrl: redis.url, redisNamespace: NS, leaseNamespace: NS });
  M = await startGateway({ ...common, host: '127.0.0.1', redisUrl: '' });
}, 120_000);

afterAll(async () => {
  process.env = saved;
  await Promise.allSettled([R?.stop(), M?.stop()]);
  await redis?.stop();
  await engine?.stop();
  removeDir(repo);
  removeDir(fnDir);
});

describe.each([
  ['Redis', () => R],
  ['memory', () => M],
] as const)('async job results (%s job queue)', (_kind, gw) => {
  it('a job of a function with an API key is readable only with the key its call was made with', async () => {
    const g = gw();
    const r = await call(g, 'keyed_bytes', { 'X-API-Key': 'key-alice' });
    expect(r.status).toBe(202);
    const { id } = (await r.json()) as Json;
    const done = await finished(g, id, { 'X-API-Key': 'key-alice' });
    expect(done.status).toBe('succeeded');
    expect(JSON.stringify(done.result.outputs.OUTPUT0)).toContain('secret-result');

    const none = await readJob(g, id);
    expect([none.status, none.body.error.code]).toEqual([401, 'JOB_KEY_MISSING']);
    // Another key the function accepts is someone else's: it does not read alice's results.
    for (const key of ['key-bob', 'wrong', 'key-alic', 'KEY-ALICE', 'key-alicee']) {
      const other = await readJob(g, id, { 'X-API-Key': key });
      expect([key, other.status, other.body.error.code]).toEqual([key, 403, 'JOB_KEY_INVALID']);
      expect(JSON.stringify(other.body)).not.toContain('secret-result');
    }
    expect((await readJob(g, id, { Authorization: 'Bearer key-alice' })).status).toBe(200);
    // A revoked key reads nothing any more.
    process.env.ACCESS_KEYS = 'key-bob';
    try {
      expect((await readJob(g, id, { 'X-API-Key': 'key-alice' })).status).toBe(403);
    } finally {
      process.env.ACCESS_KEYS = 'key-alice, key-bob';
    }
  });

  it('job ids are unguessable: 24 base64url characters (144 random bits), all distinct', async () => {
    const ids = new Set<string>();
    for (let i = 0; i < 8; i++) {
      const r = await call(gw(), 'open_bytes');
      expect(r.status).toBe(202);
      const { id, status_url } = (await r.json()) as Json;
      expect(id).toMatch(/^[A-Za-z0-9_-]{24}$/);
      expect(status_url).toContain(`/jobs/${id}`);
      ids.add(id);
    }
    expect(ids.size).toBe(8);
  });

  it('a job of a function without a key is read by its id alone; a malformed id is not found', async () => {
    const r = await call(gw(), 'open_bytes');
    const { id } = (await r.json()) as Json;
    expect((await finished(gw(), id, {})).status).toBe('succeeded');
    const bad = await readJob(gw(), `${id}%2F..%2Fx`);
    expect([bad.status, bad.body.error.code]).toEqual([404, 'JOB_NOT_FOUND']);
  });
});

describe('what Redis holds of a keyed job', () => {
  it('an HMAC of the key, never the key', async () => {
    const r = await call(R, 'keyed_bytes', { 'X-API-Key': 'key-alice' });
    const { id } = (await r.json()) as Json;
    await finished(R, id, { 'X-API-Key': 'key-alice' });
    const c = new Redis(redis.url);
    try {
      const doc = JSON.parse((await c.hget(`${NS}:job:${id}`, 'doc'))!);
      expect(doc.keyHash).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(JSON.stringify(doc)).not.toContain('key-alice');
    } finally {
      c.disconnect();
    }
  });
});

describe.skipIf(!HOST_ADDR)('console without a console token', () => {
  it('answers loopback clients only, judged by the socket; the job list has ids and states, no results', async () => {
    const r = await call(R, 'keyed_bytes', { 'X-API-Key': 'key-alice' });
    const { id } = (await r.json()) as Json;
    await finished(R, id, { 'X-API-Key': 'key-alice' });

    for (const p of ['/console', '/console/jobs', '/console/api/jobs', '/console/api/overview']) {
      const spoofs: Array<Record<string, string>> = [
        {},
        { 'X-Forwarded-For': '127.0.0.1' },
        { Forwarded: 'for=127.0.0.1', 'X-Real-IP': '127.0.0.1' },
      ];
      for (const headers of spoofs) {
        const remote = await fetch(at(R, p, HOST_ADDR), { headers });
        expect([p, remote.status, ((await remote.json()) as Json).error.code]).toEqual([p, 403, 'CONSOLE_LOCAL_ONLY']);
      }
    }
    const page = await fetch(at(R, '/console/jobs'));
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('answers requests from this machine only (loopback)');
    const list = await fetch(at(R, '/console/api/jobs'));
    expect(list.status).toBe(200);
    const text = await list.text();
    expect(JSON.parse(text).jobs.find((j: Json) => j.id === id)).toMatchObject({ function: 'keyed_bytes', status: 'succeeded' });
    expect(text).not.toContain('OUTPUT0');
    expect(text).not.toContain('secret-result');
  });

  it('with GATEWAY_CONSOLE_TOKEN set, other hosts reach it with the token', async () => {
    process.env.GATEWAY_CONSOLE_TOKEN = 'view-token';
    try {
      expect((await fetch(at(R, '/console/api/jobs', HOST_ADDR))).status).toBe(401);
      expect((await fetch(at(R, '/console/api/jobs', HOST_ADDR), { headers: { 'X-Console-Token': 'view-token' } })).status).toBe(200);
      expect((await fetch(at(R, '/console', HOST_ADDR))).status).toBe(200);
    } finally {
      delete process.env.GATEWAY_CONSOLE_TOKEN;
    }
  });
});
