// `npm start` (scripts/start.ts, compiled: scripts/build.mjs then
// dist/scripts/start.js, exactly what the npm script runs): engine + gateway
// supervised, the children on dist/'s JavaScript with no TypeScript loader. A killed
// gateway is restarted and its successor's start-up sweep cleans the dead
// one's regions (in-memory leases); a killed engine makes the gateway answer
// 503 until the restarted engine is back; SIGTERM exits 0 leaving nothing.
// The engine's model-repository, trace, logging and shared-memory APIs answer
// the gateway's key only (START_ADMIN_KEY here, generated otherwise).
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TritonGrpcClient } from '../../client/grpc-client.ts';
import { listSharedMemoryKeys } from '../../client/shared-memory.ts';
import { shmUnlinkIfExists } from '../../native/index.ts';
import { makeJpeg } from '../fixtures/images.ts';
import { freePort, waitFor } from './L0_gateway-support.ts';

const ROOT = path.join(import.meta.dirname, '../..');
const PREFIX = 'tgws';
let sup: ChildProcess;
let gwPort: number;
let grpcPort: number;
let image: Buffer;
let out = '';
let httpPort: number;
const ADMIN_KEY = `k${process.pid}${Date.now()}`;
/** An engine client holding npm start's key, as the gateway does. */
const adminClient = () => new TritonGrpcClient(`127.0.0.1:${grpcPort}`, { metadata: { 'triton-grpc-protocol-admin-key': ADMIN_KEY } });

/** Children of the supervisor whose command line contains `script`. */
function childPids(script: string): number[] {
  const pids: number[] = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid !== sup.pid) continue;
      if (fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').includes(script)) pids.push(Number(d));
    } catch {
      // exited meanwhile
    }
  }
  return pids;
}

const call = () =>
  fetch(`http://127.0.0.1:${gwPort}/fn/search_pipeline_ensemble`, {
    method: 'POST',
    body: image,
    headers: { 'Content-Type': 'image/jpeg' },
  });
/** The local channel's socket (scripts/start.ts names it after the supervisor's pid). */
const localSock = () => path.join(os.tmpdir(), `tritonish-engine-${sup.pid}-local.sock`);
/** ModelInfer calls the gateway sent over the local channel (its metric). */
const localCalls = async () =>
  Number(/^gateway_engine_local_channel_calls (\d+)/m.exec(await (await fetch(`http://127.0.0.1:${gwPort}/metrics`)).text())?.[1] ?? 0);
const ownersOnShm = () => [...new Set(listSharedMemoryKeys(`/${PREFIX}_`).map((k) => k.split('_')[1]!))];

beforeAll(async () => {
  [gwPort, grpcPort] = [await freePort(), await freePort()];
  httpPort = await freePort();
  const metricsPort = await freePort();
  image = await makeJpeg(64, 48, 5);
  execFileSync(process.execPath, ['scripts/build.mjs', '--if-stale'], { cwd: ROOT, stdio: 'pipe' });
  sup = spawn(process.execPath, ['dist/scripts/start.js'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      REDIS_URL: '',
      ENGINE_QUIET: '0',
      START_ADMIN_KEY: ADMIN_KEY,
      START_ENGINE_ARGS: `--grpc-port=${grpcPort} --http-port=${httpPort} --metrics-port=${metricsPort} --http-address=127.0.0.1`,
      START_GATEWAY_ARGS: `--port=${gwPort} --host=127.0.0.1 --prefix=${PREFIX} --lease-ttl-ms=500 --arena-regions=1 --arena-region-bytes=${4 << 20}`,
    },
  });
  sup.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  sup.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  await waitFor('gateway ready', async () => (await fetch(`http://127.0.0.1:${gwPort}/readyz`)).status === 200, 120_000, 200).catch((e) => {
    throw new Error(`${(e as Error).message}\n${out}`);
  });
}, 180_000);

afterAll(async () => {
  if (sup && sup.exitCode === null && sup.signalCode === null) {
    for (const p of [...childPids('dist/gateway/main.js'), ...childPids('dist/engine/main.js')]) process.kill(p, 'SIGKILL');
    sup.kill('SIGKILL');
  }
  for (const k of listSharedMemoryKeys(`/${PREFIX}_`)) shmUnlinkIfExists(k); // only after a failed test
});

describe('npm start supervisor', () => {
  it('serves calls through the gateway', async () => {
    const r = await call();
    expect(r.status).toBe(200);
    expect(((await r.json()) as { outputs: { FINAL_VECTOR: { shape: number[] } } }).outputs.FINAL_VECTOR.shape).toEqual([512]);
  });

  it('sends the calls over the local channel, whose socket only this user may open', async () => {
    await waitFor('a call over the local channel', async () => (await call()).status === 200 && (await localCalls()) > 0);
    expect(fs.statSync(localSock()).mode & 0o777).toBe(0o600);
  });

  it("keeps the engine's model-repository, trace, logging and shared-memory APIs to the gateway's key", async () => {
    const engineHttp = (p: string, headers: Record<string, string> = {}) =>
      fetch(`http://127.0.0.1:${httpPort}${p}`, { method: 'POST', headers, body: '{}' });
    for (const p of ['/v2/repository/index', '/v2/trace/setting', '/v2/logging', '/v2/systemsharedmemory/region/x/unregister']) {
      const r = await engineHttp(p);
      expect([p, r.status, await r.json()]).toEqual([p, 403, { error: "This API is restricted, expecting header 'admin-key'" }]);
    }
    expect((await engineHttp('/v2/repository/index', { 'admin-key': ADMIN_KEY })).status).toBe(200);
    const anon = new TritonGrpcClient(`127.0.0.1:${grpcPort}`);
    const admin = adminClient();
    try {
      await expect(anon.logSettings()).rejects.toMatchObject({
        code: 14,
        details: "This protocol is restricted, expecting header 'triton-grpc-protocol-admin-key'",
      });
      await expect(anon.systemSharedMemoryStatus()).rejects.toMatchObject({ code: 14 });
      await expect(anon.repositoryModelUnload('clip_encoder_model')).rejects.toMatchObject({ code: 14 });
      // Inference and metadata stay open; the gateway's own regions were registered with its key.
      expect((await anon.serverReady()).ready).toBe(true);
      const regions = Object.keys(await admin.systemSharedMemoryStatus());
      expect(regions.length).toBeGreaterThan(0);
    } finally {
      anon.close();
      admin.close();
    }
    // The key is in no child's command line (other local users can read those).
    for (const pid of [...childPids('dist/engine/main.js'), ...childPids('dist/gateway/main.js')]) {
      expect(fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8')).not.toContain(ADMIN_KEY);
    }
  });

  it('restarts a killed gateway, whose successor cleans the dead one’s regions', async () => {
    const [pid] = childPids('dist/gateway/main.js');
    expect(pid).toBeDefined();
    const before = ownersOnShm();
    expect(before).toHaveLength(1);
    expect(before[0]!.startsWith(`${pid}x`)).toBe(true);
    process.kill(pid!, 'SIGKILL');
    await waitFor('a new gateway', () => childPids('dist/gateway/main.js').some((p) => p !== pid), 20_000);
    await waitFor('new gateway serving', async () => (await call()).status === 200, 60_000, 100);
    await waitFor(
      'old regions cleaned',
      async () => {
        const engine = adminClient();
        try {
          const regions = Object.keys(await engine.systemSharedMemoryStatus());
          return !ownersOnShm().includes(before[0]!) && !regions.some((n) => n.includes(before[0]!));
        } finally {
          engine.close();
        }
      },
      10_000,
    );
  }, 90_000);

  it('answers 503 while the engine is down and recovers when the supervisor restarts it', async () => {
    const [pid] = childPids('dist/engine/main.js');
    process.kill(pid!, 'SIGKILL');
    await waitFor(
      '503 from the gateway',
      async () => {
        const r = await call();
        return r.status === 503 && ((await r.json()) as { error: { code: string } }).error.code === 'ENGINE_UNAVAILABLE';
      },
      10_000,
      20,
    );
    await waitFor('served again', async () => (await call()).status === 200, 90_000, 200);
    // The restarted engine replaced the killed one's stale socket; the gateway's channel reconnects to it.
    const before = await localCalls();
    await waitFor(
      'calls over the local channel again',
      async () => (await call()).status === 200 && (await localCalls()) > before,
      20_000,
      200,
    );
  }, 120_000);

  it('SIGTERM stops both children, exits 0 and leaves no region behind', async () => {
    const exit = new Promise<number | null>((r) => sup.once('exit', (code) => r(code)));
    sup.kill('SIGTERM');
    expect(await exit).toBe(0);
    expect(listSharedMemoryKeys(`/${PREFIX}_`)).toEqual([]);
    expect(childPids('main.js')).toEqual([]);
    expect(fs.existsSync(localSock())).toBe(false);
  }, 60_000);
});
