// Gateway hardening (issue 13) on a real engine and gateway: every body
// reader stops at its limit with a 413 from the catalog (chunked bodies
// too, no buffering of the rest), slow clients get the catalog's 408, a
// staged call that the model refuses is not retried inline (and says it was
// staged: X-Payload-Transfer: shm), and async calls
// to a function without `async` settings run with the documented defaults.
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { TritonGrpcClient } from '../../client/grpc-client.ts';
import { startEngine } from '../../engine/server/server.ts';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { setQuiet } from '../../common/logger.ts';
import { signTimestamped } from '../../gateway/webhooks/signature.ts';
import { removeDir, tempRepo } from './helpers.ts';
import { waitFor } from './L0_gateway-support.ts';

// The environment this file stubs goes back after it (tests share a worker process: vitest.config.ts).
afterAll(() => vi.unstubAllEnvs());

type Engine = Awaited<ReturnType<typeof startEngine>>;
const MB = 1 << 20;

/** A js model that refuses (INVALID_ARG) any input whose first value is negative. */
const PICKY_MODEL = `export async function execute(requests: any[]) {
  return requests.map((r: any) => {
    const x = new Float32Array(Uint8Array.from(r.inputs.INPUT0.data).buffer);
    if (x[0]! < 0) return { error: { code: 'INVALID_ARG', message: 'picky: negative input' } };
    return { outputs: { OUTPUT0: { datatype: 'FP32', shape: [...r.inputs.INPUT0.shape], data: x } } };
  });
}
`;
const PICKY_CONFIG = `name: "picky"
backend: "js"
default_model_filename: "model.ts"
max_batch_size: 0
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
`;

let repo: string;
let fnDir: string;
let engine: Engine;
let gw: RunningGateway;
let direct: TritonGrpcClient;
const prefix = `tgwh${process.pid}`;
/** The gateway's keep-alive idle timeout here (Node's own default is 5 s). */
const IDLE_MS = 1000;

beforeAll(async () => {
  setQuiet(true);
  repo = tempRepo('gw-hardening', ['identity_bytes', 'js_echo']);
  fs.mkdirSync(path.join(repo, 'picky', '1'), { recursive: true });
  fs.writeFileSync(path.join(repo, 'picky', 'config.pbtxt'), PICKY_CONFIG);
  fs.writeFileSync(path.join(repo, 'picky', '1', 'model.ts'), PICKY_MODEL);
  engine = await startEngine({
    modelRepository: repo,
    grpcPort: 0,
    httpPort: -1,
    metricsPort: -1,
    host: '127.0.0.1',
    allowClientShm: true,
  });
  direct = new TritonGrpcClient(`127.0.0.1:${engine.grpcPort}`);
  fnDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-hard-fn-'));
  const def = (name: string, model: string, extra: object = {}) =>
    fs.writeFileSync(path.join(fnDir, `${name}.json`), JSON.stringify({ name, target: { model }, limits: { maxBodyBytes: MB }, ...extra }));
  def('small_bytes', 'identity_bytes');
  def('small_echo', 'js_echo');
  def('picky_fn', 'picky', { limits: { maxBodyBytes: 16 * MB } });
  def('bytes_noasync', 'identity_bytes');
  def('picky_hook', 'picky', {
    limits: { maxBodyBytes: 16 * MB },
    webhook: { secretEnv: 'PICKY_HOOK_SECRET', inputs: { INPUT0: '$.values' } },
  });
  vi.stubEnv('PICKY_HOOK_SECRET', 'picky-hook-secret');
  gw = await startGateway({
    port: 0,
    host: '127.0.0.1',
    engine: `127.0.0.1:${engine.grpcPort}`,
    functions: fnDir,
    shmThreshold: 4096,
    arenaRegions: 2,
    arenaRegionBytes: 4 * MB,
    prefix,
    timeouts: { headersMs: 400, bodyMs: 600, idleMs: IDLE_MS },
  });
}, 120_000);

afterAll(async () => {
  await gw?.stop();
  direct?.close();
  await engine?.stop();
  removeDir(repo);
  removeDir(fnDir);
});

interface Reply {
  status: number;
  body: string;
  sentBytes: number;
}

/**
 * POST a chunked body of `total` bytes in 64 KiB chunks (no Content-Length),
 * noting how much had been written when the reply arrived.
 */
function postChunked(p: string, contentType: string, total: number, chunk: (i: number) => Buffer): Promise<Reply> {
  return new Promise((resolve, reject) => {
    let sent = 0;
    let replied = false;
    const req = http.request(
      {
        host: '127.0.0.1',
        port: gw.port,
        path: p,
        method: 'POST',
        headers: { 'Content-Type': contentType, 'Transfer-Encoding': 'chunked' },
      },
      (res) => {
        replied = true;
        const at = sent;
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode!, body, sentBytes: at }));
        res.on('error', reject);
      },
    );
    req.on('error', (e) => (replied ? undefined : reject(e)));
    let i = 0;
    const pump = () => {
      while (!replied && sent < total) {
        const b = chunk(i++);
        sent += b.length;
        if (!req.write(b)) return void req.once('drain', pump);
      }
      if (!replied) req.end();
    };
    pump();
  });
}

const filler = (n: number) => () => Buffer.alloc(n, 0x41);

describe('body limits hold on every reader', () => {
  it('chunked raw body over the limit: 413 from the catalog before the body is all sent', async () => {
    const r = await postChunked('/fn/small_bytes', 'application/octet-stream', 60 * MB, filler(64 * 1024));
    expect(r.status).toBe(413);
    expect(JSON.parse(r.body).error.code).toBe('BODY_TOO_LARGE');
    expect(r.sentBytes).toBeLessThan(30 * MB);
  });

  it('chunked JSON body over the limit: 413', async () => {
    const r = await postChunked('/fn/small_echo', 'application/json', 20 * MB, (i) =>
      Buffer.from(i === 0 ? '{"inputs":{"INPUT0":[' : '1,'.repeat(32 * 1024)),
    );
    expect(r.status).toBe(413);
    expect(JSON.parse(r.body).error.code).toBe('BODY_TOO_LARGE');
  });

  it('chunked multipart body over the limit: 413 and nothing reaches the engine', async () => {
    const before = await identityCount();
    const boundary = 'xBOUNDARYx';
    const head = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="INPUT0"; filename="a.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`,
    );
    const r = await postChunked('/fn/small_bytes', `multipart/form-data; boundary=${boundary}`, 60 * MB, (i) =>
      i === 0 ? head : Buffer.alloc(64 * 1024, 0x42),
    );
    expect(r.status).toBe(413);
    expect(JSON.parse(r.body).error.code).toBe('BODY_TOO_LARGE');
    expect(r.sentBytes).toBeLessThan(30 * MB);
    expect(await identityCount()).toBe(before);
  });

  it('async call with a chunked body over the limit: 413', async () => {
    const r = await new Promise<Reply>((resolve, reject) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port: gw.port,
          path: '/fn/small_bytes',
          method: 'POST',
          headers: { 'Content-Type': 'application/octet-stream', Prefer: 'respond-async' },
        },
        (res) => {
          let body = '';
          res.on('data', (d: Buffer) => (body += d.toString()));
          res.on('end', () => resolve({ status: res.statusCode!, body, sentBytes: 0 }));
        },
      );
      req.on('error', () => undefined);
      req.write(Buffer.alloc(2 * MB));
      req.end();
      setTimeout(() => reject(new Error('no reply')), 10_000).unref();
    });
    expect(r.status).toBe(413);
    expect(JSON.parse(r.body).error.code).toBe('BODY_TOO_LARGE');
  });

  it('a body under the limit still works, chunked', async () => {
    const r = await postChunked('/fn/small_bytes', 'application/octet-stream', 100_000, filler(10_000));
    expect(r.status, r.body).toBe(200);
  });
});

// Concurrent (issue 38): each case is its own connection, timed from its own connect against the gateway's
// timers; none waits on another.
describe.concurrent('slow clients', () => {
  /** Send `text` on a raw socket, then nothing; resolve with what came back when the server closed. */
  function stall(text: string): Promise<{ reply: string; ms: number }> {
    return new Promise((resolve, reject) => {
      const t0 = Date.now();
      const s = net.connect(gw.port, '127.0.0.1', () => s.write(text));
      let reply = '';
      s.on('data', (d) => (reply += d.toString()));
      s.on('close', () => resolve({ reply, ms: Date.now() - t0 }));
      s.on('error', () => undefined);
      setTimeout(() => reject(new Error('server never closed the connection')), 10_000).unref();
    });
  }

  it('headers that never finish get 408 with the catalog body', async () => {
    const r = await stall('POST /fn/small_bytes HTTP/1.1\r\nHost: x\r\n');
    expect(r.reply).toMatch(/^HTTP\/1.1 408/);
    expect(JSON.parse(r.reply.slice(r.reply.indexOf('\r\n\r\n') + 4)).error.code).toBe('REQUEST_TIMEOUT');
    expect(r.ms).toBeLessThan(5000);
  });

  // Connections start on the HTTP/1.1 front (net/http1), which keeps node:http's headersTimeout itself (issue 37).
  it('a connection that sends nothing gets 408 with the catalog body (node:http headersTimeout)', async () => {
    const r = await stall('');
    expect(r.reply).toMatch(/^HTTP\/1.1 408/);
    expect(JSON.parse(r.reply.slice(r.reply.indexOf('\r\n\r\n') + 4)).error.code).toBe('REQUEST_TIMEOUT');
    expect(r.ms).toBeGreaterThanOrEqual(350);
    expect(r.ms).toBeLessThan(5000);
  });

  it(`an idle keep-alive connection is closed after the idle timeout (${IDLE_MS / 1000} s here; Node alone waits 5 s)`, async () => {
    const r = await stall('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(r.reply).toMatch(/^HTTP\/1.1 200/);
    expect(r.ms).toBeGreaterThanOrEqual(IDLE_MS * 0.75);
    expect(r.ms).toBeLessThan(IDLE_MS + 2500);
  });

  it('a body that never finishes gets 408 with the catalog body', async () => {
    const r = await stall(
      'POST /fn/small_bytes HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000\r\n\r\nabc',
    );
    expect(r.reply).toMatch(/^HTTP\/1.1 408/);
    expect(r.reply).toMatch(/REQUEST_TIMEOUT/);
    expect(r.ms).toBeLessThan(5000);
  });
});

async function identityCount(): Promise<number> {
  const s = await direct.modelStatistics('identity_bytes');
  return s.model_stats.reduce((n, m) => n + Number((m as { inference_count?: number }).inference_count ?? 0), 0);
}

async function pickyFailures(): Promise<number> {
  const s = await direct.modelStatistics('picky');
  return s.model_stats.reduce((n, m) => n + Number((m as any).inference_stats?.fail?.count ?? 0), 0);
}

describe('staged calls retry inline only for a lost region', () => {
  it('a staged call the model refuses fails once, even while another region of the arena is missing', async () => {
    const regions = Object.keys(await direct.systemSharedMemoryStatus())
      .filter((n) => n.startsWith(prefix))
      .sort();
    expect(regions.length).toBe(2);
    await direct.systemSharedMemoryUnregister(regions[1]!); // not the region this call stages into
    const before = await pickyFailures();
    const values = Array.from({ length: 4096 }, (_, i) => (i === 0 ? -1 : i));
    const r = await fetch(`http://127.0.0.1:${gw.port}/fn/picky_fn`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ inputs: { INPUT0: values } }),
    });
    expect(r.status).toBe(400); // 4096 FP32 = 16 KiB, above the 4 KiB threshold: staged
    expect(r.headers.get('x-payload-transfer')).toBe('shm'); // it was staged, refused or not (issue 21)
    expect(await pickyFailures()).toBe(before + 1);
    await waitFor(
      'the arena re-registered its region',
      async () => Object.keys(await direct.systemSharedMemoryStatus()).includes(regions[1]!),
      10_000,
    );
  });

  it('an inbound webhook call the model refuses after staging says shm too', async () => {
    const body = JSON.stringify({ values: Array.from({ length: 4096 }, (_, i) => (i === 0 ? -1 : i)) });
    const ts = String(Math.floor(Date.now() / 1000));
    const r = await fetch(`http://127.0.0.1:${gw.port}/fn/picky_hook`, {
      method: 'POST',
      body,
      headers: { 'Content-Type': 'application/json', 'X-Timestamp': ts, 'X-Signature-256': signTimestamped('picky-hook-secret', ts, body) },
    });
    expect(r.status).toBe(400);
    expect(((await r.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: 'ENGINE_REJECTED',
      message: expect.stringContaining('picky: negative input'),
    });
    expect(r.headers.get('x-payload-transfer')).toBe('shm');
  });

  it('a staged call whose own region the engine lost is retried inline and succeeds', async () => {
    const regions = Object.keys(await direct.systemSharedMemoryStatus())
      .filter((n) => n.startsWith(prefix))
      .sort();
    for (const n of regions) await direct.systemSharedMemoryUnregister(n);
    const values = Array.from({ length: 4096 }, (_, i) => i);
    const r = await fetch(`http://127.0.0.1:${gw.port}/fn/picky_fn`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ inputs: { INPUT0: values } }),
    });
    expect(r.status, await r.clone().text()).toBe(200);
    expect(r.headers.get('x-payload-transfer')).toBe('inline');
  });
});

describe('async calls to a function without async settings', () => {
  it('are accepted with the documented defaults and run', async () => {
    const r = await fetch(`http://127.0.0.1:${gw.port}/fn/bytes_noasync`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/octet-stream', Prefer: 'respond-async' },
      body: Buffer.from('hello'),
    });
    expect(r.status).toBe(202);
    const { id } = (await r.json()) as { id: string };
    const done = await waitFor(
      'the job to finish',
      async () => {
        const j = (await (await fetch(`http://127.0.0.1:${gw.port}/jobs/${id}`)).json()) as { status: string };
        return j.status === 'succeeded' || j.status === 'failed' ? j : undefined;
      },
      10_000,
    );
    expect(done.status).toBe('succeeded');
  });
});
