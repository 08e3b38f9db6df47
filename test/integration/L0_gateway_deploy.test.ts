// Config deploys on the real engine with two gateway replicas sharing Redis:
// admin auth, the GET/PUT round trip, an invalid bundle refused whole while
// the old functions keep serving, a valid deploy under load that fails no
// call, the other replica converging within a second, rollback, and the
// deploy CLI against a running gateway.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { setQuiet } from '../../common/logger.ts';
import { TestRedis, waitFor } from './L0_gateway-support.ts';
import { ROOT, removeDir, startTestEngine, tempRepo } from './helpers.ts';

type Json = Record<string, any>;
const TOKEN = 'admin-test-token';

let engine: Awaited<ReturnType<typeof startTestEngine>>;
let redis: TestRedis;
let repo: string;
let fnDir: string;
let A: RunningGateway;
let B: RunningGateway;
const url = (g: RunningGateway, p: string) => `http://127.0.0.1:${g.port}${p}`;
const admin = (g: RunningGateway, method: string, p: string, body?: unknown, token = TOKEN) =>
  fetch(url(g, p), {
    method,
    headers: { 'Content-Type': 'application/json', ...(token ? { Authorization: `Bearer ${token}` } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
const INPUTS = { inputs: { INPUT0: Array.from({ length: 16 }, (_, i) => i), INPUT1: Array.from({ length: 16 }, () => 2) } };
const calc = (g: RunningGateway) =>
  fetch(url(g, '/fn/calc'), { method: 'POST', body: JSON.stringify(INPUTS), headers: { 'Content-Type': 'application/json' } });
const activeVersion = async (g: RunningGateway) => ((await (await admin(g, 'GET', '/admin/functions')).json()) as Json).version as string;

const V1 = [{ name: 'calc', target: { model: 'simple' }, outputs: { sum: 'OUTPUT0' } }];
const V2 = [
  { name: 'calc', target: { model: 'simple' }, outputs: { sum: 'OUTPUT0', diff: 'OUTPUT1' } },
  { name: 'echo', target: { model: 'js_echo' } },
];

beforeAll(async () => {
  setQuiet(true);
  vi.stubEnv('GATEWAY_ADMIN_TOKEN', TOKEN);
  repo = tempRepo('gw-deploy', ['simple', 'js_echo']);
  engine = await startTestEngine({ modelRepository: repo, httpPort: -1, metricsPort: -1 });
  redis = await TestRedis.start();
  fnDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-deploy-fn-'));
  fs.writeFileSync(path.join(fnDir, 'calc.json'), JSON.stringify(V1[0]));
  const opts = {
    port: 0,
    host: '127.0.0.1',
    engine: `127.0.0.1:${engine.grpcPort}`,
    functions: fnDir,
    shm: false,
    redisUrl: redis.url,
    leaseNamespace: 'gwdeploy',
  };
  A = await startGateway(opts);
  B = await startGateway(opts);
}, 120_000);

afterAll(async () => {
  vi.unstubAllEnvs();
  try {
    await Promise.allSettled([A?.stop(), B?.stop()]);
  } finally {
    await redis?.stop();
    await engine?.stop();
  }
  removeDir(repo);
  removeDir(fnDir);
});

describe('config deploys', () => {
  it('admin routes need the bearer token', async () => {
    const no = await admin(A, 'GET', '/admin/functions', undefined, '');
    expect([no.status, ((await no.json()) as Json).error.code]).toEqual([401, 'ADMIN_TOKEN_MISSING']);
    const bad = await admin(A, 'PUT', '/admin/functions', { functions: [] }, 'wrong');
    expect([bad.status, ((await bad.json()) as Json).error.code]).toEqual([403, 'ADMIN_TOKEN_INVALID']);
  });

  it('GET returns the active bundle in the form PUT accepts', async () => {
    const got = (await (await admin(A, 'GET', '/admin/functions')).json()) as Json;
    expect(got.version).toMatch(/^sha-/);
    expect(got.functions.map((f: Json) => f.name)).toEqual(['calc']);
    const again = await admin(A, 'PUT', '/admin/functions', got);
    expect(again.status).toBe(200);
    expect(((await again.json()) as Json).version).toBe(got.version);
    expect(await activeVersion(B)).toBe(got.version);
  });

  it('an invalid bundle is refused whole with every error; the old functions keep serving', async () => {
    const before = await activeVersion(A);
    const bad = {
      version: 'bad-1',
      functions: [
        ...V2,
        { name: 'ghost', target: { model: 'no_such_model' } },
        { name: 'miswired', target: { model: 'simple' }, inputs: { a: 'INPUT0', b: 'NOPE' } },
        { name: 'calc', target: { model: 'simple' } },
        { name: 'bad name!', target: { model: 'simple' } },
      ],
    };
    const r = await admin(A, 'PUT', '/admin/functions', bad);
    expect(r.status).toBe(400);
    const e = ((await r.json()) as Json).error;
    expect(e.code).toBe('BUNDLE_INVALID');
    const text = e.errors.join('\n');
    expect(text).toMatch(/functions\.2 \(ghost\): target model 'no_such_model'/);
    expect(text).toMatch(/functions\.3 \(miswired\): input 'b' maps to 'NOPE'/);
    expect(text).toMatch(/functions\.4\.name: duplicate function 'calc'/);
    expect(text).toMatch(/functions\.5\.name/);
    expect(e.message).toBe(`function bundle refused with ${e.errors.length} error(s); nothing changed`);
    expect(await activeVersion(A)).toBe(before);
    expect(await activeVersion(B)).toBe(before);
    expect((await calc(A)).status).toBe(200);
    expect((await fetch(url(A, '/fn/echo'))).status).toBe(404);
  });

  it('a valid deploy under load fails no call; the other replica switches within a second; rollback restores', async () => {
    const v1 = await activeVersion(A);
    let stop = false;
    const statuses: number[] = [];
    const outputs = new Set<string>();
    const loop = async (g: RunningGateway) => {
      while (!stop) {
        const r = await calc(g);
        statuses.push(r.status);
        const body = (await r.json()) as Json;
        if (r.status === 200) outputs.add(Object.keys(body.outputs).sort().join(','));
      }
    };
    const workers = [loop(A), loop(A), loop(B), loop(B)];
    await new Promise((r) => setTimeout(r, 300));
    const t0 = Date.now();
    const put = await admin(A, 'PUT', '/admin/functions', { version: 'v2', functions: V2 });
    expect(put.status).toBe(200);
    expect(((await put.json()) as Json).version).toBe('v2');
    await waitFor('replica B on v2', async () => (await activeVersion(B)) === 'v2', 1000, 10);
    const converged = Date.now() - t0;
    await new Promise((r) => setTimeout(r, 300));
    stop = true;
    await Promise.all(workers);
    expect(converged).toBeLessThan(1000);
    expect(statuses.length).toBeGreaterThan(20);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect([...outputs].sort()).toEqual(['diff,sum', 'sum']); // both versions served, no failure between
    const echo = await fetch(url(B, '/fn/echo'), {
      method: 'POST',
      body: JSON.stringify({ inputs: { INPUT0: [1.5, 2] } }),
      headers: { 'Content-Type': 'application/json' },
    });
    expect(((await echo.json()) as Json).outputs.OUTPUT0.data).toEqual([1.5, 2]);

    const rb = await admin(B, 'POST', '/admin/functions/rollback');
    expect(rb.status).toBe(200);
    expect(((await rb.json()) as Json).version).toBe(v1);
    await waitFor('replica A rolled back', async () => (await activeVersion(A)) === v1, 1000, 10);
    const after = (await (await calc(A)).json()) as Json;
    expect(Object.keys(after.outputs)).toEqual(['sum']);
    expect((await fetch(url(A, '/fn/echo'))).status).toBe(404);
    const none = await admin(A, 'POST', '/admin/functions/rollback');
    expect([none.status, ((await none.json()) as Json).error.code]).toEqual([409, 'ROLLBACK_UNAVAILABLE']);
    const conflict = await admin(A, 'PUT', '/admin/functions', { version: 'v2', functions: V1 });
    expect([conflict.status, ((await conflict.json()) as Json).error.code]).toEqual([409, 'BUNDLE_VERSION_CONFLICT']);
  });

  it('npm run deploy: the CLI deploys a folder and reports a refusal', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-deploy-cli-'));
    try {
      for (const f of V2) fs.writeFileSync(path.join(dir, `${f.name}.json`), JSON.stringify(f));
      const run = (args: string[]) =>
        new Promise<{ code: number | null; out: string }>((resolve) => {
          const p = spawn(process.execPath, ['--import', 'tsx', 'gateway/deploy/deploy-cli.ts', ...args], {
            cwd: ROOT,
            env: { ...process.env, GATEWAY_ADMIN_TOKEN: TOKEN },
          });
          let out = '';
          p.stdout.on('data', (d) => (out += d));
          p.stderr.on('data', (d) => (out += d));
          p.on('exit', (code) => resolve({ code, out }));
        });
      const ok = await run([dir, `--gateway=${url(B, '')}`, '--version=v3']);
      expect(ok).toEqual({ code: 0, out: 'deployed version v3 (2 functions)\n' });
      await waitFor('replica A on v3', async () => (await activeVersion(A)) === 'v3', 1000, 10);
      fs.writeFileSync(path.join(dir, 'ghost.json'), JSON.stringify({ name: 'ghost', target: { model: 'missing' } }));
      const refused = await run([dir, `--gateway=${url(A, '')}`]);
      expect(refused.code).toBe(1);
      expect(refused.out).toMatch(/^refused \(HTTP 400\): BUNDLE_INVALID: .*\n {2}functions\.\d \(ghost\): target model 'missing'/);
      expect(await activeVersion(A)).toBe('v3');
    } finally {
      removeDir(dir);
    }
  });
});
