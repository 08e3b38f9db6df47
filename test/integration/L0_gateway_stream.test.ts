// Streaming functions on the real engine and gateway: a function whose target
// is decoupled answers as server-sent events, NDJSON lines or one collected
// JSON array (bounded by its limits), with its output names and rows mapping
// on each response; errors before and after the first response; a client
// that goes away cancels the request down to the model; a slow reader keeps
// the gateway's buffered bytes bounded while the model sends 32 MiB; 50
// concurrent streams arrive complete and in order; an async call stores
// every response and delivers them in one signed callback; OpenAPI says so.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { setQuiet } from '../../common/logger.ts';
import { STREAM_HIGH_WATER_BYTES, streamStats } from '../../gateway/calls/function-stream.ts';
import { signBody, signatureMatches } from '../../gateway/webhooks/signature.ts';
import { removeDir, startTestEngine, tempRepo } from './helpers.ts';
import { waitFor } from './L0_gateway-support.ts';
import { writeCountModel, writeStreamModels } from '../fixtures/stream-models.ts';

type Json = Record<string, any>;
const SECRET = 'whsec-stream';

let engine: Awaited<ReturnType<typeof startTestEngine>>;
let repo: string;
let fnDir: string;
let gw: RunningGateway;
let base: string;
let hook: { url: string; got: Array<{ headers: http.IncomingHttpHeaders; body: string }>; close(): void };

const call = (n: number, o: { prompt?: string; delay?: number; pad?: number; failAt?: number } = {}) => ({
  inputs: { PROMPT: [o.prompt ?? 'p'], N: [n], DELAY_MS: [o.delay ?? 0], PAD_BYTES: [o.pad ?? 0], FAIL_AT: [o.failAt ?? -1] },
});
const post = (fn: string, body: unknown, accept?: string, headers: Record<string, string> = {}) =>
  fetch(`${base}/fn/${fn}`, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'Content-Type': 'application/json', ...(accept ? { Accept: accept } : {}), ...headers },
  });

/** Parse an SSE body into {event, data} records (checks each block is `[event: x\n]data: ...`). */
function sse(text: string): Array<{ event: string; data: Json }> {
  expect(text.endsWith('\n\n')).toBe(true);
  return text
    .slice(0, -2)
    .split('\n\n')
    .map((block) => {
      const lines = block.split('\n');
      const event = lines[0]!.startsWith('event: ') ? lines.shift()!.slice(7) : 'message';
      expect(lines.length).toBe(1);
      expect(lines[0]!.startsWith('data: ')).toBe(true);
      return { event, data: JSON.parse(lines[0]!.slice(6)) as Json };
    });
}

beforeAll(async () => {
  setQuiet(true);
  vi.stubEnv('GATEWAY_WEBHOOK_SECRET', SECRET);
  repo = tempRepo('gw-stream', []);
  writeStreamModels(repo);
  writeCountModel(repo);
  engine = await startTestEngine({ modelRepository: repo, httpPort: -1, metricsPort: -1 });
  const got: Array<{ headers: http.IncomingHttpHeaders; body: string }> = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      got.push({ headers: req.headers, body });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  hook = { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/cb`, got, close: () => server.close() };
  fnDir = mkdtempSync(path.join(os.tmpdir(), 'gw-stream-fn-'));
  const defs = [
    { name: 'count', target: { model: 'js_count' }, outputs: { text: 'TEXT', seq: 'SEQ' }, async: { callbackAllow: [hook.url] } },
    { name: 'count_pad', target: { model: 'js_count' }, outputs: { seq: 'SEQ', pad: 'PAD' } },
    {
      name: 'count_rows',
      target: { model: 'js_count' },
      outputs: { text: 'TEXT', seq: 'SEQ' },
      rows: { key: 'tokens', fields: { t: 'text', i: 'seq' } },
    },
    { name: 'count_small', target: { model: 'js_count' }, outputs: { text: 'TEXT', seq: 'SEQ' }, limits: { maxBodyBytes: 2000 } },
    { name: 'upper', target: { model: 'js_upper' } },
  ];
  for (const d of defs) writeFileSync(path.join(fnDir, `${d.name}.json`), JSON.stringify(d));
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
  await gw?.stop();
  hook?.close();
  await engine?.stop();
  removeDir(repo);
  if (fnDir) rmSync(fnDir, { recursive: true, force: true });
});

describe('reply forms', () => {
  it("SSE: one event per response with the function's output names, then an end event", async () => {
    const r = await post('count', call(3), 'text/event-stream');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toContain('text/event-stream');
    const ev = sse(await r.text());
    expect(ev.slice(0, 3).map((e) => e.event)).toEqual(['message', 'message', 'message']);
    expect(ev[0]!.data).toEqual({
      outputs: { text: { shape: [1], datatype: 'BYTES', data: ['p:0'] }, seq: { shape: [1], datatype: 'INT32', data: [0] } },
    });
    expect(ev.slice(0, 3).map((e) => e.data.outputs.seq.data[0])).toEqual([0, 1, 2]);
    expect(ev[3]).toEqual({ event: 'end', data: { responses: 3 } });
  });

  it('NDJSON: one JSON line per response, rows mapping applied', async () => {
    const r = await post('count_rows', call(2, { prompt: 'q' }), 'application/x-ndjson');
    expect(r.headers.get('content-type')).toContain('application/x-ndjson');
    const lines = (await r.text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toEqual([{ tokens: [{ t: 'q:0', i: 0 }] }, { tokens: [{ t: 'q:1', i: 1 }] }]);
  });

  it('plain JSON: the responses collected into one array, bounded by maxBodyBytes', async () => {
    const r = await post('count', call(4));
    expect(r.status).toBe(200);
    const arr = (await r.json()) as Json[];
    expect(arr.map((x) => x.outputs.text.data[0])).toEqual(['p:0', 'p:1', 'p:2', 'p:3']);
    const big = await post('count_small', call(100));
    expect(big.status).toBe(502);
    expect(((await big.json()) as Json).error.code).toBe('STREAM_TOO_LARGE');
  });

  it('a function whose target is not decoupled still answers as before', async () => {
    const r = await post('upper', { inputs: { PROMPT: [['abc']] } }, 'text/event-stream');
    expect(r.headers.get('content-type')).toContain('application/json');
    expect(((await r.json()) as Json).outputs.TEXT.data).toEqual(['ABC']);
  });
});

describe('errors', () => {
  it('an error mid-stream is an error event and the stream goes on; first-response errors are the catalog reply', async () => {
    const ev = sse(await (await post('count', call(3, { failAt: 1 }), 'text/event-stream')).text());
    expect(ev.map((e) => e.event)).toEqual(['message', 'error', 'message', 'end']);
    expect(ev[1]!.data.error.code).toBe('STREAM_RESPONSE_ERROR');
    expect(ev[1]!.data.error.message).toContain('js_count failed at 1');
    const first = await post('count', call(2, { failAt: 0 }), 'text/event-stream');
    expect(first.status).toBe(502);
    expect(((await first.json()) as Json).error.code).toBe('STREAM_RESPONSE_ERROR');
    const bad = await post('count', { inputs: { PROMPT: ['p'] } }, 'text/event-stream');
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as Json).error.code).toBe('INPUT_MISSING');
  });
});

describe('flow', () => {
  it('a client that goes away cancels the request down to the model', async () => {
    const markName = `gw-stream-cancel-${process.pid}`;
    const mark = path.join(os.tmpdir(), markName);
    rmSync(mark, { force: true });
    await new Promise<void>((resolve, reject) => {
      const req = http.request(
        `${base}/fn/count`,
        { method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream' } },
        (res) => {
          res.once('data', () => {
            req.destroy();
            resolve();
          });
        },
      );
      req.on('error', () => {});
      req.once('error', reject);
      req.end(JSON.stringify(call(1000, { prompt: `mark:${markName}`, delay: 10 })));
    });
    await waitFor('the model to see its abort signal', () => existsSync(mark), 5000);
    expect(Number(readFileSync(mark, 'utf8'))).toBeLessThan(1000);
    rmSync(mark, { force: true });
  });

  it("a slow reader keeps the gateway's buffered bytes bounded; reading on gets every response in order", async () => {
    const n = 512;
    const pad = 64 * 1024; // 32 MiB in all
    streamStats.peakBufferedBytes = streamStats.bufferedBytes;
    const seqs: number[] = [];
    let stalledPeak = 0;
    await new Promise<void>((resolve, reject) => {
      const req = http.request(
        `${base}/fn/count_pad`,
        { method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/x-ndjson' } },
        (res) => {
          res.pause(); // the slow reader: nothing read for a while
          setTimeout(() => {
            stalledPeak = streamStats.peakBufferedBytes;
            let buf = '';
            res.setEncoding('utf8');
            res.on('data', (d: string) => {
              buf += d;
              let i;
              while ((i = buf.indexOf('\n')) >= 0) {
                seqs.push(JSON.parse(buf.slice(0, i)).outputs.seq.data[0]);
                buf = buf.slice(i + 1);
              }
            });
            res.on('end', () => resolve());
            res.resume();
          }, 1500);
        },
      );
      req.once('error', reject);
      req.end(JSON.stringify(call(n, { pad })));
    });
    expect(seqs).toEqual([...Array(n).keys()]);
    // While stalled the gateway held at most about one high-water mark (plus the last response), not 32 MiB.
    expect(stalledPeak).toBeGreaterThan(0);
    expect(stalledPeak).toBeLessThan(STREAM_HIGH_WATER_BYTES + 2 * pad);
    expect(streamStats.peakBufferedBytes).toBeLessThan(STREAM_HIGH_WATER_BYTES + 2 * pad);
  }, 60_000);

  it('50 concurrent streams each get every event, in order', async () => {
    const runs = await Promise.all(
      Array.from({ length: 50 }, async (_, k) =>
        sse(await (await post('count', call(20, { prompt: `s${k}`, delay: 2 }), 'text/event-stream')).text()),
      ),
    );
    runs.forEach((ev, k) => {
      expect(ev.at(-1)).toEqual({ event: 'end', data: { responses: 20 } });
      expect(ev.slice(0, -1).map((e) => e.data.outputs.text.data[0])).toEqual(Array.from({ length: 20 }, (_, i) => `s${k}:${i}`));
    });
    expect(streamStats.open).toBe(0);
  }, 60_000);
});

describe('async and OpenAPI', () => {
  it('an async call stores every response and the callback carries them all, signed', async () => {
    const r = await post('count', call(5), undefined, { 'X-Callback-Url': hook.url });
    expect(r.status).toBe(202);
    const { id } = (await r.json()) as Json;
    await waitFor('the callback', () => hook.got.length > 0, 10_000);
    const got = hook.got[0]!;
    const body = JSON.parse(got.body) as Json;
    expect(JSON.stringify(body)).toContain('p:4');
    const job = (await (await fetch(`${base}/jobs/${id}`)).json()) as Json;
    expect(job.result.map((x: Json) => x.outputs.seq.data[0])).toEqual([0, 1, 2, 3, 4]);
    expect(signatureMatches(signBody(SECRET, got.body), got.headers['x-signature-256'] as string)).toBe(true);
  });

  it('OpenAPI describes the streaming replies', async () => {
    const doc = (await (await fetch(`${base}/openapi.json`)).json()) as Json;
    const content = doc.paths['/fn/count'].post.responses['200'].content;
    expect(Object.keys(content).sort()).toEqual(['application/json', 'application/x-ndjson', 'text/event-stream']);
    expect(Object.keys(doc.paths['/fn/upper'].post.responses['200'].content)).not.toContain('text/event-stream');
  });
});
