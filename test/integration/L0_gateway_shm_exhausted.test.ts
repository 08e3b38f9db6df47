// A full /dev/shm (issue 41): the engine and the gateway run as child
// processes in a private mount namespace whose /dev/shm is a 16 MiB tmpfs,
// 14 MiB of it taken by a file before the gateway starts, so its staging
// regions (2 x 4 MiB) cannot be reserved. Calls above the staging threshold
// go inline when they fit the inline limit (right bytes, 200), are refused
// with 503 SHM_EXHAUSTED when they do not, and /readyz, /metrics and the
// console say shared memory is exhausted. Once the file is removed the arena
// reserves its regions on a heartbeat and calls are staged again. Before the
// fix the regions were made sparse and touched under the SIGBUS guard, and
// every staged call answered 400 ENGINE_REJECTED "...shrank while registered".
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeModel } from '../fixtures/test-models.ts';
import { freePort, waitFor } from './L0_gateway-support.ts';
import { TritonGrpcClient } from '../../client/grpc-client.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const MiB = 1024 * 1024;
const prefix = `tgwx${process.pid}`;

const BYTE_SUM_MODEL = `// byte_sum: OUTPUT0 = [byte count, sum of the bytes] (test/integration/L0_gateway_shm_exhausted.test.ts).
type T = { datatype: string; shape: number[]; data: Uint8Array };
export async function initialize(): Promise<void> {}
export async function execute(requests: Array<{ inputs: Record<string, T> }>) {
  return requests.map((r) => {
    const d = r.inputs.INPUT0!.data;
    let sum = 0;
    for (let i = 0; i < d.length; i++) sum += d[i]!;
    return { outputs: { OUTPUT0: { datatype: 'FP64', shape: [2], data: new Uint8Array(Float64Array.of(d.length, sum).buffer) } } };
  });
}
export async function finalize(): Promise<void> {}
`;
const BYTE_SUM_CONFIG = `name: "byte_sum"
backend: "js"
default_model_filename: "model.ts"
max_batch_size: 0
input [ { name: "INPUT0", data_type: TYPE_UINT8, dims: [ -1 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP64, dims: [ 2 ] } ]
`;

function unavailable(): string | undefined {
  if (process.platform !== 'linux') return 'not Linux';
  if (process.getuid?.() !== 0) return 'not root (mounting a tmpfs needs CAP_SYS_ADMIN)';
  try {
    execFileSync('unshare', ['-m', 'sh', '-c', 'mount -t tmpfs -o size=1m tmpfs /dev/shm'], { stdio: 'pipe' });
  } catch (e) {
    return `mount namespaces not permitted: ${(e as Error).message.split('\n')[0]}`;
  }
  return undefined;
}
const why = unavailable();

let holder: ChildProcess;
const children: ChildProcess[] = [];
let dir: string;
let gwPort: number;
const logs: string[] = [];

/** Run a command in the holder's mount namespace. */
const inNs = (cmd: string[]) => execFileSync('nsenter', ['-t', String(holder.pid), '-m', ...cmd], { stdio: 'pipe' }).toString();

function spawnInNs(script: string, args: string[]): ChildProcess {
  const p = spawn(
    'nsenter',
    ['-t', String(holder.pid), '-m', `--wd=${ROOT}`, process.execPath, '--import', 'tsx', path.join(ROOT, script), ...args],
    {
      cwd: ROOT,
      env: { ...process.env, REDIS_URL: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  p.stdout!.on('data', (b: Buffer) => logs.push(b.toString()));
  p.stderr!.on('data', (b: Buffer) => logs.push(b.toString()));
  children.push(p);
  return p;
}

const url = (p: string) => `http://127.0.0.1:${gwPort}${p}`;
const body = (n: number) => Buffer.alloc(n, 3);
async function call(n: number) {
  const r = await fetch(url('/fn/sum'), { method: 'POST', headers: { 'Content-Type': 'application/octet-stream' }, body: body(n) });
  return {
    status: r.status,
    transfer: r.headers.get('x-payload-transfer'),
    retryAfter: r.headers.get('retry-after'),
    json: (await r.json()) as Record<string, any>,
  };
}
async function metric(name: string): Promise<number> {
  const text = await (await fetch(url('/metrics'))).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `) || l.startsWith(name.replace('}', '') + '}'));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}
const readyz = async () => (await (await fetch(url('/readyz'))).json()) as { staging: Record<string, unknown> };

beforeAll(async () => {
  if (why) return;
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-shm-full-'));
  const repo = path.join(dir, 'repo');
  writeModel(repo, 'byte_sum', BYTE_SUM_CONFIG, { 'model.ts': BYTE_SUM_MODEL });
  const fnDir = path.join(dir, 'functions');
  fs.mkdirSync(fnDir);
  fs.writeFileSync(path.join(fnDir, 'sum.json'), JSON.stringify({ name: 'sum', target: { model: 'byte_sum' } }));

  holder = spawn('unshare', ['-m', 'sh', '-c', 'mount -t tmpfs -o size=16m tmpfs /dev/shm && echo mounted && exec sleep 600'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    holder.stdout!.once('data', () => resolve());
    holder.once('exit', (c) => reject(new Error(`unshare exited ${c}`)));
  });
  inNs(['dd', 'if=/dev/zero', 'of=/dev/shm/filler', 'bs=1M', 'count=14']);

  const grpcPort = await freePort();
  gwPort = await freePort();
  spawnInNs('engine/main.ts', [
    `--model-repository=${repo}`,
    `--grpc-port=${grpcPort}`,
    '--allow-http=false',
    '--allow-metrics=false',
    '--allow-client-shm=true',
    `--shm-key-prefix=/${prefix}_`,
  ]);
  const client = new TritonGrpcClient(`127.0.0.1:${grpcPort}`);
  await waitFor('engine ready', async () => (await client.serverReady({ timeoutMs: 1000 })).ready, 90_000, 200).catch((e) => {
    throw new Error(`${(e as Error).message}\n${logs.join('').slice(-3000)}`);
  });
  client.close();
  spawnInNs('gateway/main.ts', [
    `--port=${gwPort}`,
    '--host=127.0.0.1',
    `--engine=127.0.0.1:${grpcPort}`,
    `--functions=${fnDir}`,
    `--prefix=${prefix}`,
    '--shm-threshold=65536',
    '--arena-regions=2',
    `--arena-region-bytes=${4 * MiB}`,
    `--max-inline-bytes=${MiB}`,
    '--lease-ttl-ms=1500',
  ]);
  await waitFor('gateway ready', async () => (await fetch(url('/readyz'))).status === 200, 60_000, 200).catch((e) => {
    throw new Error(`${(e as Error).message}\n${logs.join('').slice(-3000)}`);
  });
}, 180_000);

afterAll(async () => {
  for (const p of children) p.kill('SIGTERM');
  await Promise.all(children.map((p) => (p.exitCode === null ? new Promise((r) => p.once('exit', r)) : undefined)));
  holder?.kill('SIGKILL'); // the namespace and its tmpfs go with its last process
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
}, 30_000);

describe.skipIf(why)('a full /dev/shm at staging (issue 41)', () => {
  it('a call above the staging threshold and under the inline limit goes inline with its bytes intact (200)', async () => {
    const r = await call(512 * 1024);
    expect(r.status, JSON.stringify(r.json) + logs.join('').slice(-2000)).toBe(200);
    expect(r.transfer).toBe('inline');
    expect((Object.values(r.json.outputs ?? r.json)[0] as { data: number[] }).data).toEqual([512 * 1024, 3 * 512 * 1024]);
  });

  it('a call over the inline limit is refused with 503 SHM_EXHAUSTED and Retry-After, not 400', async () => {
    const r = await call(2 * MiB);
    expect(r.status).toBe(503);
    expect(r.json.error.code).toBe('SHM_EXHAUSTED');
    expect(r.json.error.message).toMatch(/shared memory for staging is exhausted/);
    expect(Number(r.retryAfter)).toBeGreaterThan(0);
  });

  it('/readyz, /metrics and the console say shared memory is exhausted', async () => {
    const s = (await readyz()).staging;
    expect(s.shmExhausted).toBe(true);
    expect(String(s.reason)).toMatch(/shared memory exhausted: 0 of 2 staging regions/);
    expect(await metric('gateway_staging_shm_exhausted')).toBe(1);
    expect(await metric('gateway_staging_fallback_inline_total{reason="shm_exhausted"}')).toBeGreaterThanOrEqual(1);
    expect(await metric('gateway_shm_exhausted_total{outcome="inline"}')).toBeGreaterThanOrEqual(1);
    expect(await metric('gateway_shm_exhausted_total{outcome="refused"}')).toBeGreaterThanOrEqual(1);
    const overview = (await (await fetch(url('/console/api/overview'))).json()) as { staging: { shmExhausted: boolean } };
    expect(overview.staging.shmExhausted).toBe(true);
  });

  it('posix_fallocate itself answers ENOSPC on the full tmpfs, and the half-made object is unlinked', () => {
    // The arena checks statfs first (no reservation tried while the room plainly lacks); this is the reservation underneath.
    const script =
      "import { createSharedMemoryRegion } from './client/shared-memory.ts';" +
      "try { createSharedMemoryRegion('r', '/" +
      prefix +
      "_probe', 8 * 1024 * 1024, { exclusive: true, reserve: true }); console.log('made'); }" +
      'catch (e) { console.log(`${e.errno} ${e.syscall}`); }';
    const out = inNs([`--wd=${ROOT}`, process.execPath, '--import', 'tsx', '--input-type=module', '-e', script]);
    expect(out.trim()).toBe('ENOSPC posix_fallocate');
    expect(inNs(['ls', '/dev/shm']).split('\n')).not.toContain(`${prefix}_probe`);
  });

  it('once space is freed the arena reserves its regions on a heartbeat and calls are staged again', async () => {
    inNs(['rm', '/dev/shm/filler']);
    await waitFor(
      'staging back',
      async () => {
        const s = (await readyz()).staging;
        return s.shmExhausted === false && s.enabled === true;
      },
      15_000,
      100,
    );
    expect(await metric('gateway_staging_shm_exhausted')).toBe(0);
    const r = await call(2 * MiB);
    expect(r.status).toBe(200);
    expect(r.transfer).toBe('shm');
    expect((Object.values(r.json.outputs ?? r.json)[0] as { data: number[] }).data).toEqual([2 * MiB, 3 * 2 * MiB]);
    expect(
      inNs(['ls', '/dev/shm'])
        .split('\n')
        .filter((n) => n.startsWith(`${prefix}_`)),
    ).toHaveLength(2);
  });
});
