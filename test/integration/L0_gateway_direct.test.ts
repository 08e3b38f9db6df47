// The gateway's direct route (gateway/http/direct-call.ts) against the Hono path:
// two gateways on one real engine, one with the direct route and one with
// every call through Hono (--direct-route=false), get the same requests and
// must give the same answers — status, headers, body — over plain calls,
// every input error, auth, limits, staged bodies, async calls, inbound
// webhooks and requests the direct route hands to Hono; then the same
// metrics. Plus: the direct route did serve the plain calls (its replies are
// cheaper to tell apart only by timing, so a counter in the app proves it).
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { directCallsServed } from '../../gateway/http/direct-call.ts';
import { setQuiet } from '../../common/logger.ts';
import { BUNDLED_REPO, startTestEngine } from './helpers.ts';

let engine: RunningEngine;
let direct: RunningGateway;
let hono: RunningGateway;
let fnDir: string;
let repo: string;

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}
interface Case {
  name: string;
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Send the body chunked (no Content-Length). */
  chunked?: boolean;
}

/** One request on a fresh connection, as raw as node:http allows. */
function send(port: number, c: Case): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, method: c.method ?? 'POST', path: c.path ?? '/fn/product_recommender', headers: c.headers, agent: false },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (d: Buffer) => parts.push(d));
        res.on('end', () => {
          const headers = { ...res.headers } as Record<string, string>;
          delete headers.date;
          resolve({ status: res.statusCode!, headers, body: Buffer.concat(parts).toString('utf8') });
        });
      },
    );
    req.on('error', reject);
    if (c.body !== undefined && c.chunked) {
      const b = Buffer.from(c.body);
      req.write(b.subarray(0, 10));
      setTimeout(() => req.end(b.subarray(10)), 5);
    } else req.end(c.body);
  });
}

/** Fields that differ by nature between two answers (a job id) made equal. */
function normalise(a: Answer): Answer {
  const body = a.body
    .replace(/"id":"[^"]+"/g, '"id":"<id>"')
    .replace(/\/jobs\/[^"]+/g, '/jobs/<id>')
    .replace(/:\d{4,5}\//g, ':<port>/');
  const headers = { ...a.headers };
  if (headers.location) headers.location = headers.location.replace(/\/jobs\/.*/, '/jobs/<id>').replace(/:\d+\//, ':<port>/');
  return { ...a, headers, body };
}

const KEY = { 'x-api-key': 'k-one', 'content-type': 'application/json' };
const row = (k: number) => Array.from({ length: 64 }, (_, i) => Math.sin(i * 0.3 + k));
const call = (inputs: unknown, extra: Record<string, unknown> = {}) => JSON.stringify({ inputs, ...extra });

const CASES: Case[] = [
  { name: 'nested rows', headers: { ...KEY, 'x-request-id': 'r1' }, body: call({ user_features: [row(1)] }) },
  { name: 'data and shape', headers: { ...KEY, 'x-request-id': 'r2' }, body: call({ user_features: { data: row(2), shape: [1, 64] } }) },
  { name: 'flat data', headers: { ...KEY, 'x-request-id': 'r3' }, body: call({ user_features: { data: row(3) } }) },
  { name: 'flat array', headers: { ...KEY, 'x-request-id': 'r3b' }, body: call({ user_features: row(3) }) },
  { name: 'three rows', headers: { ...KEY, 'x-request-id': 'r4' }, body: call({ user_features: [row(1), row(2), row(3)] }) },
  {
    name: 'matching datatype',
    headers: { ...KEY, 'x-request-id': 'r5' },
    body: call({ user_features: { data: [row(5)], datatype: 'FP32' } }),
  },
  {
    name: 'wrong datatype',
    headers: { ...KEY, 'x-request-id': 'r6' },
    body: call({ user_features: { data: [row(5)], datatype: 'INT32' } }),
  },
  { name: 'outputs listed', headers: { ...KEY, 'x-request-id': 'r7' }, body: call({ user_features: [row(7)] }, { outputs: ['scores'] }) },
  { name: 'unknown output', headers: { ...KEY, 'x-request-id': 'r8' }, body: call({ user_features: [row(7)] }, { outputs: ['nope'] }) },
  {
    name: 'bearer key',
    headers: { authorization: 'Bearer k-two', 'content-type': 'application/json', 'x-request-id': 'r9' },
    body: call({ user_features: [row(9)] }),
  },
  { name: 'no key', headers: { 'content-type': 'application/json' }, body: call({ user_features: [row(9)] }) },
  { name: 'wrong key', headers: { 'x-api-key': 'nope', 'content-type': 'application/json' }, body: call({ user_features: [row(9)] }) },
  { name: 'unknown function', path: '/fn/no_such_fn', headers: KEY, body: '{}' },
  { name: 'not JSON', headers: { ...KEY, 'x-request-id': 'e1' }, body: '{"inputs": ' },
  { name: 'empty body', headers: { ...KEY, 'x-request-id': 'e2' }, body: '' },
  { name: 'missing input', headers: { ...KEY, 'x-request-id': 'e3' }, body: call({}) },
  { name: 'unknown input', headers: { ...KEY, 'x-request-id': 'e4' }, body: call({ user_features: [row(1)], other: [1] }) },
  { name: 'extra key', headers: { ...KEY, 'x-request-id': 'e5' }, body: call({ user_features: [row(1)] }, { extra: 1 }) },
  { name: 'ragged', headers: { ...KEY, 'x-request-id': 'e6' }, body: call({ user_features: [row(1), [1, 2]] }) },
  { name: 'string element', headers: { ...KEY, 'x-request-id': 'e7' }, body: call({ user_features: [[...row(1).slice(1), 'x']] }) },
  { name: 'null element', headers: { ...KEY, 'x-request-id': 'e8' }, body: call({ user_features: [[...row(1).slice(1), null]] }) },
  { name: 'boolean element', headers: { ...KEY, 'x-request-id': 'e8b' }, body: call({ user_features: [[...row(1).slice(1), true]] }) },
  { name: 'wrong width', headers: { ...KEY, 'x-request-id': 'e9' }, body: call({ user_features: [[1, 2, 3]] }) },
  {
    name: 'shape not holding data',
    headers: { ...KEY, 'x-request-id': 'e10' },
    body: call({ user_features: { data: row(1), shape: [2, 64] } }),
  },
  {
    name: 'shape of another spec',
    headers: { ...KEY, 'x-request-id': 'e11' },
    body: call({ user_features: { data: row(1), shape: [64, 1] } }),
  },
  { name: 'empty rows', headers: { ...KEY, 'x-request-id': 'e12' }, body: call({ user_features: [] }) },
  {
    name: 'b64 value',
    headers: { ...KEY, 'x-request-id': 'e13' },
    body: call({ user_features: { b64: Buffer.alloc(256).toString('base64') } }),
  },
  {
    name: 'deep nesting',
    headers: { ...KEY, 'x-request-id': 'e14' },
    body: call({ user_features: JSON.parse('['.repeat(80) + '1' + ']'.repeat(80)) }),
  },
  { name: '__proto__ input', headers: { ...KEY, 'x-request-id': 'e15' }, body: '{"inputs":{"__proto__":[1],"user_features":[[1]]}}' },
  { name: 'inputs not an object', headers: { ...KEY, 'x-request-id': 'e16' }, body: '{"inputs":[1,2]}' },
  {
    name: 'batch over the engine limit',
    headers: { ...KEY, 'x-request-id': 'e17' },
    body: call({ user_features: Array.from({ length: 65 }, (_, i) => row(i)) }),
  },
  {
    name: 'body over the limit',
    headers: { ...KEY, 'x-request-id': 'e18' },
    body: call({ user_features: [row(1)] }, { pad: 'x'.repeat(2 << 20) }),
  },
  { name: 'chunked', headers: { ...KEY, 'x-request-id': 'c1' }, body: call({ user_features: [row(11)] }), chunked: true },
  {
    name: 'chunked over the limit',
    headers: { ...KEY, 'x-request-id': 'c2' },
    body: call({ user_features: [row(1)] }, { pad: 'x'.repeat(2 << 20) }),
    chunked: true,
  },
  {
    name: 'charset',
    headers: { ...KEY, 'content-type': 'application/json; charset=utf-8', 'x-request-id': 't1' },
    body: call({ user_features: [row(12)] }),
  },
  {
    name: '+json type',
    headers: { ...KEY, 'content-type': 'application/vnd.call+json', 'x-request-id': 't2' },
    body: call({ user_features: [row(12)] }),
  },
  { name: 'text type', headers: { ...KEY, 'content-type': 'text/plain', 'x-request-id': 't3' }, body: call({ user_features: [row(12)] }) },
  { name: 'no content type', headers: { 'x-api-key': 'k-one', 'x-request-id': 't4' }, body: call({ user_features: [row(12)] }) },
  {
    name: 'query output',
    path: '/fn/product_recommender?output=scores',
    headers: { ...KEY, 'x-request-id': 'q1' },
    body: call({ user_features: [row(13)] }),
  },
  {
    name: 'binary accept',
    headers: { ...KEY, accept: 'application/octet-stream', 'x-request-id': 'q2' },
    body: call({ user_features: [row(13)] }),
  },
  {
    name: 'encoded name',
    path: '/fn/product%5Frecommender',
    headers: { ...KEY, 'x-request-id': 'p1' },
    body: call({ user_features: [row(14)] }),
  },
  { name: 'trailing slash', path: '/fn/product_recommender/', headers: KEY, body: call({ user_features: [row(14)] }) },
  {
    name: 'dot segment',
    path: '/fn/../fn/product_recommender',
    headers: { ...KEY, 'x-request-id': 'p2' },
    body: call({ user_features: [row(14)] }),
  },
  { name: 'GET', method: 'GET', headers: KEY },
  {
    name: 'staged rows',
    headers: { ...KEY, 'x-request-id': 's1' },
    body: call({ user_features: Array.from({ length: 40 }, (_, i) => row(i)) }),
  },
  { name: 'async', headers: { ...KEY, prefer: 'respond-async', 'x-request-id': 'a1' }, body: call({ user_features: [row(15)] }) },
  { name: 'async bad input', headers: { ...KEY, prefer: 'respond-async' }, body: call({ nope: 1 }) },
  {
    name: 'callback not allowed',
    headers: { ...KEY, 'x-callback-url': 'http://example.invalid/cb' },
    body: call({ user_features: [row(15)] }),
  },
  { name: 'webhook unsigned', path: '/fn/hooked_recommender', headers: { 'content-type': 'application/json' }, body: '{"data":{"f":[1]}}' },
  {
    name: 'int input',
    path: '/fn/int_echo',
    headers: { 'content-type': 'application/json', 'x-request-id': 'i1' },
    body: call({ x: [1, 2, 3] }),
  },
  {
    name: 'int out of range',
    path: '/fn/int_echo',
    headers: { 'content-type': 'application/json', 'x-request-id': 'i2' },
    body: call({ x: [1, 2, 2 ** 40] }),
  },
  {
    name: 'int fraction',
    path: '/fn/int_echo',
    headers: { 'content-type': 'application/json', 'x-request-id': 'i3' },
    body: call({ x: [1.5] }),
  },
];

beforeAll(async () => {
  setQuiet(true);
  repo = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-direct-repo-'));
  fs.cpSync(path.join(BUNDLED_REPO, 'product_recommender_model'), path.join(repo, 'product_recommender_model'), { recursive: true });
  fs.mkdirSync(path.join(repo, 'int_echo', '1'), { recursive: true });
  fs.writeFileSync(
    path.join(repo, 'int_echo', 'config.pbtxt'),
    [
      'name: "int_echo"',
      'backend: "js"',
      'max_batch_size: 0',
      'input [ { name: "X", data_type: TYPE_INT32, dims: [ -1 ] } ]',
      'output [ { name: "Y", data_type: TYPE_INT32, dims: [ -1 ] } ]',
    ].join('\n'),
  );
  fs.writeFileSync(
    path.join(repo, 'int_echo', '1', 'model.js'),
    'export function execute(requests) { return requests.map((r) => ({ outputs: { Y: { datatype: "INT32", shape: r.inputs.X.shape, data: r.inputs.X.data } } })); }\n',
  );
  engine = await startTestEngine({ modelRepository: repo, httpPort: -1, metricsPort: -1 });
  fnDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-direct-fn-'));
  const rec = JSON.parse(fs.readFileSync(path.join(BUNDLED_REPO, '../functions/product_recommender.json'), 'utf8'));
  fs.writeFileSync(path.join(fnDir, 'product_recommender.json'), JSON.stringify(rec));
  fs.writeFileSync(
    path.join(fnDir, 'hooked_recommender.json'),
    JSON.stringify({
      ...rec,
      name: 'hooked_recommender',
      auth: undefined,
      webhook: { secretEnv: 'GW_DIRECT_HOOK_SECRET', inputs: { user_features: '$.data.f' } },
    }),
  );
  fs.writeFileSync(
    path.join(fnDir, 'int_echo.json'),
    JSON.stringify({ name: 'int_echo', target: { model: 'int_echo' }, inputs: { x: 'X' }, outputs: { y: 'Y' } }),
  );
  process.env.RECOMMENDER_API_KEYS = 'k-one, k-two';
  process.env.GW_DIRECT_HOOK_SECRET = 's3cret';
  const common = {
    host: '127.0.0.1',
    port: 0,
    engine: `127.0.0.1:${engine.grpcPort}`,
    functions: fnDir,
    shmThreshold: 4096,
    arenaRegions: 1,
    arenaRegionBytes: 1 << 20,
    console: false,
  };
  direct = await startGateway({ ...common, prefix: `gwd${process.pid}a` });
  hono = await startGateway({ ...common, prefix: `gwd${process.pid}b`, transport: { directRoute: false } });
}, 120_000);

afterAll(async () => {
  await direct?.stop();
  await hono?.stop();
  await engine?.stop();
  if (fnDir) fs.rmSync(fnDir, { recursive: true, force: true });
  if (repo) fs.rmSync(repo, { recursive: true, force: true });
  delete process.env.RECOMMENDER_API_KEYS;
  delete process.env.GW_DIRECT_HOOK_SECRET;
});

/** A request written as raw bytes (for header values node:http's client refuses to send); the reply without its Date line. */
function sendRaw(port: number, head: string, body: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () =>
      s.write(`${head}Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`),
    );
    let out = '';
    s.on('data', (d: Buffer) => (out += d.toString('latin1')));
    s.on('error', reject);
    s.on('close', () => resolve(out.replace(/^Date: .*\r\n/m, '')));
  });
}

describe('direct route vs Hono route', () => {
  let servedBefore = 0;
  it.each(CASES.map((c) => [c.name, c] as const))('%s: same status, headers and body', async (_n, c) => {
    if (c === CASES[0]) servedBefore = directCallsServed();
    const [a, b] = [await send(direct.port, c), await send(hono.port, c)];
    expect(normalise(a)).toEqual(normalise(b));
  });

  it('the direct route served the plain JSON calls, Hono the rest', () => {
    // Cases up to 'charset'/'+json type' are plain JSON calls to a known or unknown name; the others fall back.
    const plain = CASES.filter(
      (c) =>
        !c.method &&
        !c.path?.includes('%') &&
        !c.path?.endsWith('/') &&
        !c.path?.includes('..') &&
        !c.path?.includes('?') &&
        !c.path?.includes('hooked') &&
        /json/.test(c.headers?.['content-type'] ?? '') &&
        !c.headers?.prefer &&
        !c.headers?.['x-callback-url'] &&
        !c.headers?.accept,
    );
    expect(directCallsServed() - servedBefore).toBe(plain.length);
  });

  it('a request id with a control character (DEL) gets the same answer and the gateway lives on', async () => {
    // Node's parser refuses it (400) before either route: a value it accepts is one a reply header can carry.
    const head =
      'POST /fn/product_recommender HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-API-Key: k-one\r\nX-Request-Id: a\x7fb\r\n';
    const body = call({ user_features: [row(21)] });
    const [a, b] = [await sendRaw(direct.port, head, body), await sendRaw(hono.port, head, body)];
    expect(a).toEqual(b);
    expect(a).toMatch(/^HTTP\/1\.1 400 /);
    for (const port of [direct.port, hono.port]) expect((await send(port, CASES[0]!)).status).toBe(200);
  });

  it('both gateways counted the same calls in their metrics', async () => {
    const lines = async (port: number) => {
      const r = await send(port, { name: 'metrics', method: 'GET', path: '/metrics' });
      return r.body
        .split('\n')
        .filter((l) => l.startsWith('gateway_function_calls_total{'))
        .sort();
    };
    const [a, b] = [await lines(direct.port), await lines(hono.port)];
    expect(a.length).toBeGreaterThan(3);
    expect(a).toEqual(b);
  });
  it('a plain call answers with scores and a staged one went through shm', async () => {
    const plain = await send(direct.port, CASES[0]!);
    expect(plain.status).toBe(200);
    expect(JSON.parse(plain.body).outputs.scores.data).toHaveLength(100);
    const staged = await send(direct.port, CASES.find((c) => c.name === 'staged rows')!);
    expect(staged.status).toBe(200);
    expect(staged.headers['x-payload-transfer']).toBe('shm');
  });
});
