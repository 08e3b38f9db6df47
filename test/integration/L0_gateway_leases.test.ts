// Region leases in Redis across gateway processes: kill -9 of one gateway
// under load (another gateway's reaper unregisters and unlinks every region
// the dead one held), SIGTERM (nothing left behind), and Redis stopped
// mid-load (no failed call; staging pauses and resumes). The three gateway
// processes start together before the cases; the Redis-outage case's gateway
// keeps its leases and presence under namespaces of its own, so it takes no
// part in the first case's reaping. They start while the engine loads only the
// pipeline the calls use (search_pipeline_ensemble and its two steps).
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TritonGrpcClient } from '../../client/grpc-client.ts';
import { listSharedMemoryKeys } from '../../client/shared-memory.ts';
import { shmUnlinkIfExists } from '../../native/index.ts';
import { startEngine } from '../../engine/server/server.ts';
import { RedisLeaseStore } from '../../gateway/staging/redis-lease-store.ts';
import { setQuiet } from '../../common/logger.ts';
import { makeLargeJpeg } from '../fixtures/images.ts';
import { TestRedis, freePort, waitFor } from './L0_gateway-support.ts';

const ROOT = path.join(import.meta.dirname, '../..');
const PREFIX = 'tgwl';
const NS = 'tgwl-test';
const TTL = 500;

type Engine = Awaited<ReturnType<typeof startEngine>>;
let engine: Engine;
let redis: TestRedis;
let direct: TritonGrpcClient;
let image: Buffer;
const children: ChildProcess[] = [];

interface Child {
  proc: ChildProcess;
  port: number;
  ownerId: string;
  log: () => string;
}

async function spawnGateway(ns = NS, extra: string[] = []): Promise<Child> {
  const proc = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'gateway/main.ts',
      '--port=0',
      '--host=127.0.0.1',
      `--engine=127.0.0.1:${grpcPort}`,
      `--redis-url=${redis.url}`,
      `--lease-ttl-ms=${TTL}`,
      `--prefix=${PREFIX}`,
      `--lease-namespace=${ns}`,
      ...extra,
      '--arena-regions=2',
      `--arena-region-bytes=${8 << 20}`,
      '--shm-threshold=65536',
    ],
    { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe', 'ipc'], env: { ...process.env, GATEWAY_QUIET: '0' } },
  );
  children.push(proc);
  let log = '';
  proc.stderr!.on('data', (d: Buffer) => (log += d.toString()));
  const ready = await new Promise<{ port: number; ownerId: string }>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`gateway did not start:\n${log}`)), 60_000);
    proc.on('message', (m: { ready?: boolean; port: number; ownerId: string }) => {
      if (m.ready) {
        clearTimeout(t);
        resolve(m);
      }
    });
    proc.on('exit', (code) => reject(new Error(`gateway exited with ${code}:\n${log}`)));
  });
  return { proc, ...ready, log: () => log };
}

function exited(p: ChildProcess): Promise<{ code: number | null; signal: string | null }> {
  if (p.exitCode !== null || p.signalCode !== null) return Promise.resolve({ code: p.exitCode, signal: p.signalCode });
  return new Promise((r) => p.once('exit', (code, signal) => r({ code, signal })));
}

async function call(g: Child): Promise<{ status: number; transfer: string | null; vector?: number[] }> {
  const r = await fetch(`http://127.0.0.1:${g.port}/fn/search_pipeline_ensemble`, {
    method: 'POST',
    body: image,
    headers: { 'Content-Type': 'image/jpeg' },
  });
  const body = (await r.json()) as { outputs?: { FINAL_VECTOR: { data: number[] } } };
  return { status: r.status, transfer: r.headers.get('x-payload-transfer'), vector: body.outputs?.FINAL_VECTOR.data };
}

/** Run `workers` call loops against g until stop() is called; collects every result (or thrown error). */
function load(g: Child, workers: number) {
  const results: Array<{ status: number; transfer: string | null } | { error: string }> = [];
  let running = true;
  const loops = Array.from({ length: workers }, async () => {
    while (running) {
      try {
        results.push(await call(g));
      } catch (e) {
        results.push({ error: (e as Error).message });
      }
    }
  });
  return {
    results,
    stop: async () => {
      running = false;
      await Promise.all(loops);
    },
  };
}

const regionsOf = (owner: string) => `${PREFIX}_${owner}_`;
async function engineRegions(owner: string): Promise<string[]> {
  return Object.keys(await direct.systemSharedMemoryStatus()).filter((n) => n.startsWith(regionsOf(owner)));
}
const shmKeys = (owner: string) => listSharedMemoryKeys(`/${regionsOf(owner)}`);

/** Started before the cases: a and b for the kill -9 / SIGTERM case, g for the Redis outage. */
let gateways: Promise<[Child, Child, Child]>;
/** The engine's gRPC port, chosen before it starts so that the gateways can start beside it. */
let grpcPort: number;

beforeAll(async () => {
  setQuiet(true);
  [redis, grpcPort] = await Promise.all([TestRedis.start(), freePort()]);
  // The gateways start while the engine loads (each registers its regions once the engine answers).
  gateways = Promise.all([spawnGateway(), spawnGateway(), spawnGateway(`${NS}-outage`, [`--redis-namespace=${NS}-outage`])]);
  gateways.catch(() => undefined); // a failed start fails the cases, which await it
  [engine, image] = await Promise.all([
    startEngine({
      modelRepository: path.join(ROOT, 'model_repository'),
      grpcPort,
      httpPort: -1,
      metricsPort: -1,
      allowClientShm: true,
      controlMode: 'explicit',
      loadModels: ['search_pipeline_ensemble'],
    }),
    makeLargeJpeg(1 << 20),
  ]);
  direct = new TritonGrpcClient(`127.0.0.1:${engine.grpcPort}`);
  const started = await gateways.catch(() => undefined);
  if (started) {
    await waitFor(
      'every gateway’s regions registered with the engine',
      async () => (await Promise.all(started.map((g) => engineRegions(g.ownerId)))).every((r) => r.length === 2),
      30_000,
      50,
    );
  }
}, 180_000);

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await Promise.all(children.map(exited));
  for (const k of listSharedMemoryKeys(`/${PREFIX}_`)) shmUnlinkIfExists(k); // left only by a failed test
  direct?.close();
  await engine?.stop();
  await redis?.stop();
});

describe('leases across gateway processes', () => {
  it('kill -9 under load: another gateway unregisters and unlinks every region the dead one held', async () => {
    const [a, b] = await gateways;
    expect((await engineRegions(a.ownerId)).length).toBe(2);
    expect(shmKeys(a.ownerId).length).toBe(2);
    const leases = new RedisLeaseStore(redis.url, { namespace: NS });
    await leases.ready();
    expect((await leases.list()).filter((l) => l.owner === a.ownerId).length).toBe(2);

    const la = load(a, 2);
    await waitFor('a staged call', () => la.results.some((r) => 'transfer' in r && r.transfer === 'shm'), 30_000);
    a.proc.kill('SIGKILL');
    await exited(a.proc);
    await la.stop();
    const killedAt = Date.now();
    await waitFor(
      'the dead gateway’s regions cleaned',
      async () => (await engineRegions(a.ownerId)).length === 0 && shmKeys(a.ownerId).length === 0,
      10 * TTL + 5000,
      50,
    );
    const took = Date.now() - killedAt;
    expect(took).toBeLessThan(6 * TTL + 2000); // within a few lease periods (+ reaper interval)
    expect((await leases.list()).filter((l) => l.owner === a.ownerId)).toEqual([]);
    expect(b.log()).toContain(`dead owner ${a.ownerId}`);
    // b still serves, staged.
    expect(await call(b)).toMatchObject({ status: 200, transfer: 'shm' });

    // SIGTERM under light load: no failed call, exit 0, nothing left behind.
    const lb = load(b, 1);
    await waitFor('b serving', () => lb.results.length > 0, 30_000);
    b.proc.kill('SIGTERM');
    expect(await exited(b.proc)).toEqual({ code: 0, signal: null });
    await lb.stop();
    expect(await engineRegions(b.ownerId)).toEqual([]);
    expect(shmKeys(b.ownerId)).toEqual([]);
    expect((await leases.list()).filter((l) => l.owner === b.ownerId)).toEqual([]);
    await leases.close();
  }, 120_000);

  it('Redis stopped mid-load: no failed call, inline meanwhile, staging resumes when it returns', async () => {
    const [, , g] = await gateways;
    const l = load(g, 2);
    await waitFor('staged calls', () => l.results.filter((r) => 'transfer' in r && r.transfer === 'shm').length >= 2, 30_000);
    await redis.stop();
    const outageStart = l.results.length;
    await waitFor(
      'inline calls during the outage',
      () => l.results.slice(outageStart).filter((r) => 'transfer' in r && r.transfer === 'inline').length >= 2,
      30_000,
    );
    const ready = (await (await fetch(`http://127.0.0.1:${g.port}/readyz`)).json()) as {
      leaseStore: { state: string };
      staging: { enabled: boolean; reason: string };
    };
    expect(ready.leaseStore.state).toBe('down');
    expect(ready.staging).toMatchObject({ enabled: false, reason: 'redis lease store unreachable' });
    await redis.start();
    const back = l.results.length;
    await waitFor('staging resumed', () => l.results.slice(back).some((r) => 'transfer' in r && r.transfer === 'shm'), 30_000);
    await l.stop();
    const failed = l.results.filter((r) => !('status' in r) || r.status !== 200);
    expect(failed).toEqual([]);
    expect(l.results.length).toBeGreaterThan(6);
    g.proc.kill('SIGTERM');
    expect((await exited(g.proc)).code).toBe(0);
    expect(shmKeys(g.ownerId)).toEqual([]);
  }, 120_000);
});
