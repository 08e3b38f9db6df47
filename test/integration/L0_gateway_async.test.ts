// Async calls, signed callbacks and inbound webhooks on the real engine:
// a callback that fails twice is delivered on the third attempt, signed, with
// the synchronous reply as payload; a receiver that never answers leaves the
// job dead after the limit; the allowlist and signatures refuse what they
// must; and with Redis, a gateway killed with -9 while holding 20 accepted
// jobs loses none: the restarted gateway delivers all 20.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { setQuiet } from '../../common/logger.ts';
import { signBody, signTimestamped, signatureMatches } from '../../gateway/webhooks/signature.ts';
import { TestRedis, waitFor } from './L0_gateway-support.ts';
import { ROOT, removeDir, startTestEngine, tempRepo } from './helpers.ts';

type Json = Record<string, any>;
const SECRET = 'whsec-test';
const HOOK_SECRET = 'inbound-test';

interface Got {
  headers: http.IncomingHttpHeaders;
  body: string;
  status: number;
}
/** A loopback receiver; `answer(n)` decides the reply to the n-th request: a status, or 0 = never answer. */
async function receiver(answer: (n: number) => number) {
  const got: Got[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const status = answer(got.length + 1);
      got.push({ headers: req.headers, body, status });
      if (status) res.writeHead(status).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/cb`,
    got,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}
type Receiver = Awaited<ReturnType<typeof receiver>>;

let engine: Awaited<ReturnType<typeof startTestEngine>>;
let repo: string;
let fnDir: string;
let gw: RunningGateway;
let base: string;
let flaky: Receiver;
let silent: Receiver;
const closers: Array<() => Promise<unknown>> = [];

const fnDef = (name: string, extra: object = {}) => ({
  name,
  target: { model: 'simple' },
  outputs: { sum: 'OUTPUT0', diff: 'OUTPUT1' },
  ...extra,
});
const INPUTS = { inputs: { INPUT0: Array.from({ length: 16 }, (_, i) => i), INPUT1: Array.from({ length: 16 }, () => 3) } };
const postFn = (b: string, fn: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${b}/fn/${fn}`, {
    method: 'POST',
    body: typeof body === 'string' ? body : JSON.stringify(body),
    headers: { 'Content-Type': 'application/json', ...headers },
  });

beforeAll(async () => {
  setQuiet(true);
  vi.stubEnv('GATEWAY_WEBHOOK_SECRET', SECRET);
  vi.stubEnv('HOOK_SECRET', HOOK_SECRET);
  repo = tempRepo('gw-async', ['simple', 'identity_bytes']);
  engine = await startTestEngine({ modelRepository: repo, httpPort: -1, metricsPort: -1 });
  flaky = await receiver((n) => (n <= 2 ? 500 : 200));
  silent = await receiver(() => 0);
  closers.push(flaky.close, silent.close);
  const quick = { maxDeliveryAttempts: 4, backoffMs: 20, maxBackoffMs: 50, attemptTimeoutMs: 300 };
  fnDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-async-fn-'));
  const defs = [
    fnDef('adder', { async: { callbackAllow: [flaky.url], ...quick } }),
    fnDef('adder_silent', { async: { callbackAllow: [silent.url], ...quick, maxDeliveryAttempts: 3, attemptTimeoutMs: 200 } }),
    fnDef('adder_sync_only', { async: { enabled: false } }),
    { name: 'hook_echo', target: { model: 'identity_bytes' }, webhook: { secretEnv: 'HOOK_SECRET', inputs: { INPUT0: '$.data.payload' } } },
  ];
  for (const d of defs) fs.writeFileSync(path.join(fnDir, `${d.name}.json`), JSON.stringify(d));
  gw = await startGateway({
    port: 0,
    host: '127.0.0.1',
    engine: `127.0.0.1:${engine.grpcPort}`,
    functions: fnDir,
    shm: false,
    redisUrl: '',
  });
  base = `http://127.0.0.1:${gw.port}`;
}, 120_000);

afterAll(async () => {
  vi.unstubAllEnvs();
  await Promise.allSettled([gw?.stop(), ...closers.map((c) => c())]);
  await engine?.stop();
  removeDir(repo);
  removeDir(fnDir);
});

describe('async calls with callbacks (in-memory queue)', () => {
  it('a callback failing twice arrives on the third attempt, signed, with the synchronous result', async () => {
    const sync = await postFn(base, 'adder', INPUTS);
    expect(sync.status).toBe(200);
    const syncText = await sync.text();
    const r = await postFn(base, 'adder', INPUTS, { 'X-Callback-Url': `${flaky.url}?job=1` });
    expect(r.status).toBe(202);
    const accepted = (await r.json()) as Json;
    expect(accepted.status_url).toBe(`${base}/jobs/${accepted.id}`);
    expect(r.headers.get('location')).toBe(accepted.status_url);
    await waitFor('third delivery', () => flaky.got.length >= 3, 10_000);
    expect(flaky.got.map((g) => g.status)).toEqual([500, 500, 200]);
    const third = flaky.got[2]!;
    expect(third.headers['x-job-id']).toBe(accepted.id);
    expect(third.headers['x-job-status']).toBe('succeeded');
    expect(signatureMatches(signBody(SECRET, third.body), third.headers['x-signature-256'] as string)).toBe(true);
    expect(signatureMatches(signBody('wrong', third.body), third.headers['x-signature-256'] as string)).toBe(false);
    expect(third.body).toBe(syncText);
    expect(JSON.parse(third.body).outputs.sum.data).toEqual(INPUTS.inputs.INPUT0.map((x) => x + 3));
    const job = await waitFor('job delivered', async () => {
      const j = (await (await fetch(accepted.status_url)).json()) as Json;
      return j.status === 'delivered' ? j : undefined;
    });
    expect(job).toMatchObject({ id: accepted.id, function: 'adder', outcome: 'succeeded', http_status: 200, callback: { attempts: 3 } });
    expect(job.result).toEqual(JSON.parse(syncText));
  });

  it('a receiver that never answers leaves the job dead after the limit, with the last error', async () => {
    const r = await postFn(base, 'adder_silent', INPUTS, { 'X-Callback-Url': silent.url });
    expect(r.status).toBe(202);
    const { id } = (await r.json()) as Json;
    const job = await waitFor(
      'job dead',
      async () => {
        const j = (await (await fetch(`${base}/jobs/${id}`)).json()) as Json;
        return j.status === 'dead' ? j : undefined;
      },
      10_000,
    );
    expect(job).toMatchObject({ outcome: 'succeeded', callback: { attempts: 3, max_attempts: 3 }, last_error: 'no answer within 200 ms' });
    expect(silent.got).toHaveLength(3);
  });

  it('Prefer: respond-async without a callback; refusals come from the catalog', async () => {
    const r = await postFn(base, 'adder', INPUTS, { Prefer: 'respond-async' });
    expect(r.status).toBe(202);
    const { id } = (await r.json()) as Json;
    const job = await waitFor('job done', async () => {
      const j = (await (await fetch(`${base}/jobs/${id}`)).json()) as Json;
      return j.status === 'succeeded' ? j : undefined;
    });
    expect(job.result.outputs.sum.data[15]).toBe(18);
    const code = async (res: Promise<Response>) => {
      const x = await res;
      return [x.status, ((await x.json()) as Json).error?.code];
    };
    for (const evil of ['http://127.0.0.1.evil.com/cb', `${flaky.url.replace('/cb', '/other')}`, 'https://example.com/cb']) {
      expect(await code(postFn(base, 'adder', INPUTS, { 'X-Callback-Url': evil })), evil).toEqual([400, 'CALLBACK_URL_NOT_ALLOWED']);
    }
    for (const bad of ['not a url', `http://user@${flaky.url.slice(7)}`, 'file:///etc/passwd']) {
      expect(await code(postFn(base, 'adder', INPUTS, { 'X-Callback-Url': bad })), bad).toEqual([400, 'CALLBACK_URL_INVALID']);
    }
    expect(await code(postFn(base, 'adder_sync_only', INPUTS, { Prefer: 'respond-async' }))).toEqual([400, 'ASYNC_DISABLED']);
    expect(await code(postFn(base, 'adder', { inputs: { INPUT0: INPUTS.inputs.INPUT0 } }, { Prefer: 'respond-async' }))).toEqual([
      400,
      'INPUT_MISSING',
    ]);
    expect(await code(postFn(base, 'nope', INPUTS, { Prefer: 'respond-async' }))).toEqual([404, 'FUNCTION_NOT_FOUND']);
    expect(await code(fetch(`${base}/jobs/00000000-0000-0000-0000-000000000000`))).toEqual([404, 'JOB_NOT_FOUND']);
  });
});

describe('inbound webhooks', () => {
  const event = { type: 'doc.created', data: { payload: Buffer.from('hello webhook').toString('base64') } };
  const send = (body: string, ts: string, sig: string | undefined) =>
    fetch(`${base}/fn/hook_echo`, {
      method: 'POST',
      body,
      headers: { 'Content-Type': 'application/json', 'X-Timestamp': ts, ...(sig ? { 'X-Signature-256': sig } : {}) },
    });

  it('a signed event is verified, mapped (base64 to bytes) and answered with the result', async () => {
    const body = JSON.stringify(event);
    const ts = String(Math.floor(Date.now() / 1000));
    const r = await send(body, ts, signTimestamped(HOOK_SECRET, ts, body));
    expect(r.status).toBe(200);
    const out = (await r.json()) as Json;
    expect(out.outputs.OUTPUT0.datatype).toBe('BYTES');
    expect(JSON.stringify(out.outputs.OUTPUT0.data)).toContain('hello webhook');
  });

  it('a bad, missing or stale signature is 401', async () => {
    const body = JSON.stringify(event);
    const now = Math.floor(Date.now() / 1000);
    const tampered = JSON.stringify({ ...event, type: 'x' });
    const old = String(now - 3600);
    for (const [b, ts, sig, reason] of [
      [tampered, String(now), signTimestamped(HOOK_SECRET, String(now), body), 'bad-signature'],
      [body, String(now), undefined, 'missing-signature'],
      [body, old, signTimestamped(HOOK_SECRET, old, body), 'stale-timestamp'],
      [body, String(now), signTimestamped('guess', String(now), body), 'bad-signature'],
    ] as const) {
      const r = await send(b, ts, sig);
      expect(r.status).toBe(401);
      const e = ((await r.json()) as Json).error;
      expect(e.code).toBe('WEBHOOK_SIGNATURE_INVALID');
      expect(e.message).toContain(reason);
    }
  });
});

describe('durable jobs in Redis', () => {
  let redis: TestRedis;
  const children: ChildProcess[] = [];
  afterAll(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await redis?.stop();
  });

  async function spawnGateway(dir: string, extra: string[]): Promise<{ proc: ChildProcess; port: number; log: () => string }> {
    const proc = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        'gateway/main.ts',
        '--port=0',
        '--host=127.0.0.1',
        `--engine=127.0.0.1:${engine.grpcPort}`,
        `--functions=${dir}`,
        `--redis-url=${redis.url}`,
        '--shm=false',
        '--lease-namespace=gwasync',
        ...extra,
      ],
      {
        cwd: ROOT,
        stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
        env: { ...process.env, GATEWAY_QUIET: '0', GATEWAY_WEBHOOK_SECRET: SECRET },
      },
    );
    children.push(proc);
    let log = '';
    proc.stderr!.on('data', (d: Buffer) => (log += d.toString()));
    const port = await new Promise<number>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`gateway did not start:\n${log}`)), 60_000);
      proc.on('message', (m: { ready?: boolean; port: number }) => {
        if (m.ready) {
          clearTimeout(t);
          resolve(m.port);
        }
      });
      proc.on('exit', (code) => reject(new Error(`gateway exited with ${code}:\n${log}`)));
    });
    return { proc, port, log: () => log };
  }

  it('kill -9 of a gateway holding 20 accepted jobs: the restarted gateway delivers all 20', async () => {
    redis = await TestRedis.start();
    let paused = true;
    const rx = await receiver(() => (paused ? 503 : 200));
    closers.push(rx.close);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-durable-fn-'));
    closers.push(async () => removeDir(dir));
    const def = fnDef('adder', {
      async: { callbackAllow: [rx.url], maxDeliveryAttempts: 50, backoffMs: 100, maxBackoffMs: 200, attemptTimeoutMs: 500 },
    });
    fs.writeFileSync(path.join(dir, 'adder.json'), JSON.stringify(def));
    // Two jobs run at once; the rest wait in the stream, unread.
    const first = await spawnGateway(dir, ['--jobs-concurrency=2', '--job-claim-idle-ms=1000']);
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) {
      const body = { inputs: { INPUT0: Array.from({ length: 16 }, () => i), INPUT1: Array.from({ length: 16 }, () => 1) } };
      const r = await postFn(`http://127.0.0.1:${first.port}`, 'adder', body, { 'X-Callback-Url': rx.url });
      expect(r.status).toBe(202);
      ids.push(((await r.json()) as Json).id);
    }
    await waitFor('deliveries being attempted', () => rx.got.length >= 2, 10_000);
    first.proc.kill('SIGKILL');
    await new Promise((r) => first.proc.once('exit', r));
    const failedBefore = rx.got.length;
    paused = false;
    const second = await spawnGateway(dir, ['--job-claim-idle-ms=1000']);
    await waitFor(
      'all 20 delivered',
      () => new Set(rx.got.filter((g) => g.status === 200).map((g) => g.headers['x-job-id'])).size === 20,
      30_000,
      100,
    ).catch((e) => {
      throw new Error(`${(e as Error).message}\n${second.log()}`);
    });
    const delivered = rx.got.filter((g) => g.status === 200);
    expect(new Set(delivered.map((g) => g.headers['x-job-id']))).toEqual(new Set(ids));
    for (const g of delivered) {
      expect(signatureMatches(signBody(SECRET, g.body), g.headers['x-signature-256'] as string)).toBe(true);
      const i = ids.indexOf(g.headers['x-job-id'] as string);
      expect(JSON.parse(g.body).outputs.sum.data).toEqual(Array.from({ length: 16 }, () => i + 1));
    }
    expect(failedBefore).toBeGreaterThanOrEqual(2);
    const j = (await (await fetch(`http://127.0.0.1:${second.port}/jobs/${ids[0]}`)).json()) as Json;
    expect(j.status).toBe('delivered');
    second.proc.kill('SIGTERM');
    expect(await new Promise((r) => second.proc.once('exit', (code) => r(code)))).toBe(0);
  }, 120_000);
});
