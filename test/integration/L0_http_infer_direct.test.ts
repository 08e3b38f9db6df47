// The direct node:http path for POST /v2/models/{m}[/versions/{v}]/infer
// (engine/frontends/http/direct-infer.ts) against the Hono route it stands in for:
// each request target answered over real HTTP the way the Hono app answers
// it, the request targets it leaves to Hono, body limits, bad binary
// headers, and clients that go away mid-body.
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createHttpApp, startHttpServer, type RunningServer } from '../../engine/frontends/http/http-server.ts';
import type { RunningEngine } from '../../engine/server/server.ts';
import { i32Bytes, removeDir, startTestEngine, tempRepo, toI32 } from './helpers.ts';

let repo: string;
let engine: RunningEngine;
/** A second HTTP frontend on the same engine with a 1000-byte body limit. */
let small: RunningServer;
const LIMIT = 1000;

const A = Array.from({ length: 16 }, (_, i) => 5 * i - 9);
const B = Array.from({ length: 16 }, (_, i) => 40 - i);
const header = Buffer.from(
  JSON.stringify({
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
    ],
    parameters: { binary_data_output: true },
  }),
);
const binaryBody = Buffer.concat([header, i32Bytes(A), i32Bytes(B)]);
const binaryHeaders = { 'Inference-Header-Content-Length': String(header.length), 'Content-Type': 'application/octet-stream' };
const jsonBody = Buffer.from(
  JSON.stringify({
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: A },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: B },
    ],
  }),
);

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** One request over loopback, the target sent exactly as given (no URL normalization, unlike fetch). */
function send(port: number, method: string, target: string, body?: Buffer, headers: Record<string, string> = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: target, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** The same request through the Hono app alone (app.request(), no node:http). */
async function viaHono(method: string, target: string, body?: Buffer, headers: Record<string, string> = {}): Promise<Reply> {
  const app = createHttpApp(engine.server);
  const r = await app.request(target, { method, headers, body: body as RequestInit['body'] });
  return { status: r.status, headers: Object.fromEntries(r.headers), body: Buffer.from(await r.arrayBuffer()) };
}

/** What a client can tell apart: status, the headers the infer route sets, and the body. */
const seen = (r: Reply) => ({
  status: r.status,
  type: r.headers['content-type'],
  headerLength: r.headers['inference-header-content-length'],
  body: r.body.toString('latin1'),
});

/** Bytes written on one raw connection, and everything read back until the server closes it or `waitMs` passes. */
function raw(port: number, bytes: Buffer, waitMs = 1500): Promise<{ text: string; closed: boolean }> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    const got: Buffer[] = [];
    let closed = false;
    const done = () => {
      clearTimeout(timer);
      s.destroy();
      resolve({ text: Buffer.concat(got).toString('latin1'), closed });
    };
    const timer = setTimeout(done, waitMs);
    s.on('data', (d: Buffer) => got.push(d));
    s.on('error', () => {});
    s.on('close', () => {
      closed = true;
      done();
    });
    s.write(bytes);
  });
}

const rawRequest = (target: string, body: Buffer, headers: Record<string, string | number>) =>
  Buffer.concat([
    Buffer.from(
      `POST ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n${Object.entries(headers)
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('')}\r\n`,
    ),
    body,
  ]);

beforeAll(async () => {
  repo = tempRepo('l0-http-direct', ['simple']);
  engine = await startTestEngine({ modelRepository: repo, controlMode: 'explicit', loadModels: ['simple'] });
  small = await startHttpServer(engine.server, { port: 0, host: '127.0.0.1', maxInputBytes: LIMIT });
});

afterAll(async () => {
  await small?.close();
  await engine?.stop();
  removeDir(repo);
});

describe('L0_http_infer_direct', () => {
  it('answers each request target as the Hono route does', async () => {
    const cases: Array<[string, Buffer, Record<string, string>]> = [
      ['/v2/models/simple/infer', binaryBody, binaryHeaders],
      ['/v2/models/simple/infer', jsonBody, { 'Content-Type': 'application/json' }],
      ['/v2/models/simple/infer?x=1', jsonBody, {}],
      ['/v2/models/si%6Dple/infer', binaryBody, binaryHeaders],
      ['/v2/models/simple/versions/1/infer', binaryBody, binaryHeaders],
      ['/v2/models/simple/versions/%31/infer', jsonBody, {}],
      ['/v2/models/simple/versions/7/infer', jsonBody, {}],
      ['/v2/models/simple/versions/./infer', jsonBody, {}],
      ['/v2/models/simple/versions/%2E/infer', jsonBody, {}],
      ['/v2/models/simple/versions/%2e%2e/infer', jsonBody, {}],
      ['/v2/models/./infer', jsonBody, {}],
      ['/v2/models/nope/infer', jsonBody, {}],
      ['/v2/models/a%2Fb/infer', jsonBody, {}],
      ['/v2/models/a%00b/infer', jsonBody, {}],
      ['/v2/models/a%C3b%41/infer', jsonBody, {}],
      [`/v2/models/${'x'.repeat(300)}/infer`, jsonBody, {}],
      ['/v2/models/simple/infer', binaryBody, { 'Inference-Header-Content-Length': 'abc' }],
      ['/v2/models/simple/infer', binaryBody, { 'Inference-Header-Content-Length': '99999' }],
      ['/v2/models/simple/infer', binaryBody, { 'Inference-Header-Content-Length': '-1' }],
      ['/v2/models/simple/infer', Buffer.from('{nope'), {}],
      ['/v2/models/simple/infer', Buffer.alloc(0), {}],
    ];
    for (const [target, body, headers] of cases) {
      const direct = await send(engine.httpPort, 'POST', target, body, headers);
      expect(seen(direct), target).toEqual(seen(await viaHono('POST', target, body, headers)));
      expect(Number(direct.headers['content-length']), target).toBe(direct.body.length);
    }
  });

  it('decodes the model name and version, and serves the version path', async () => {
    const r = await send(engine.httpPort, 'POST', '/v2/models/%73imple/versions/1/infer', binaryBody, binaryHeaders);
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('application/octet-stream');
    const n = Number(r.headers['inference-header-content-length']);
    expect(JSON.parse(r.body.subarray(0, n).toString())).toMatchObject({ model_name: 'simple', model_version: '1' });
    expect([...toI32(r.body.subarray(n, n + 64))]).toEqual(A.map((a, i) => a + B[i]!));
    expect([...toI32(r.body.subarray(n + 64))]).toEqual(A.map((a, i) => a - B[i]!));
  });

  it("reports errors with Triton's status and JSON", async () => {
    const unknown = await send(engine.httpPort, 'POST', '/v2/models/nope/infer', jsonBody);
    expect(unknown.status).toBe(404);
    expect(unknown.headers['content-type']).toBe('application/json');
    expect(JSON.parse(unknown.body.toString())).toEqual({ error: "Request for unknown model: 'nope' is not found" });
    const badHeader = await send(engine.httpPort, 'POST', '/v2/models/simple/infer', binaryBody, {
      'Inference-Header-Content-Length': '12x',
    });
    expect(badHeader.status).toBe(400);
    expect(JSON.parse(badHeader.body.toString()).error).toContain(
      "Inference-Header-Content-Length must be a non-negative integer, got '12x'",
    );
  });

  it('leaves other targets and methods to Hono, as before', async () => {
    // Dot segments are resolved by node-server's URL parsing, then routed by Hono.
    const dots = await send(engine.httpPort, 'POST', '/v2/models/simple/versions/../infer', binaryBody, binaryHeaders);
    expect(dots.status).toBe(200);
    const up = await send(engine.httpPort, 'POST', '/v2/models/%2e%2E/infer', jsonBody);
    expect([up.status, JSON.parse(up.body.toString())]).toEqual([404, { error: 'no endpoint for POST /v2/infer' }]);
    const trailing = await send(engine.httpPort, 'POST', '/v2/models/simple/infer/', jsonBody);
    expect(trailing.status).toBe(404);
    const get = await send(engine.httpPort, 'GET', '/v2/models/simple/infer');
    expect([get.status, JSON.parse(get.body.toString())]).toEqual([404, { error: 'no endpoint for GET /v2/models/simple/infer' }]);
    const head = await send(engine.httpPort, 'HEAD', '/v2/models/simple/infer');
    expect([head.status, head.body.length]).toEqual([404, 0]);
    const meta = await send(engine.httpPort, 'GET', '/v2/models/simple');
    expect(JSON.parse(meta.body.toString())).toMatchObject({ name: 'simple', versions: ['1'] });
  });

  it('leaves hosts node-server parses or refuses to it, as before', async () => {
    expect((await send(engine.httpPort, 'POST', '/v2/models/simple/infer', jsonBody, { Host: 'localhost:80' })).status).toBe(200);
    expect((await send(engine.httpPort, 'POST', '/v2/models/simple/infer', jsonBody, { Host: 'a b' })).status).toBe(400);
    const noHost = Buffer.concat([
      Buffer.from(`POST /v2/models/simple/infer HTTP/1.0\r\nContent-Length: ${jsonBody.length}\r\n\r\n`),
      jsonBody,
    ]);
    expect((await raw(engine.httpPort, noHost)).text).toMatch(/^HTTP\/1\.1 400/);
  });

  it('keeps the connection alive, and closes it on Connection: close', async () => {
    const two = Buffer.concat([
      rawRequest('/v2/models/simple/infer', jsonBody, { 'Content-Length': jsonBody.length }),
      rawRequest('/v2/models/nope/infer', jsonBody, { 'Content-Length': jsonBody.length, Connection: 'close' }),
    ]);
    const { text, closed } = await raw(engine.httpPort, two);
    expect(text.match(/HTTP\/1\.1 \d{3}/g)).toEqual(['HTTP/1.1 200', 'HTTP/1.1 404']);
    expect(text).toMatch(/Connection: keep-alive[\s\S]*Connection: close/);
    expect(closed).toBe(true);
  });

  it('refuses a body over the limit with 400, declared or streamed, and the connection goes on', async () => {
    const big = Buffer.alloc(LIMIT + 500, 0x20);
    const declared = await send(small.port, 'POST', '/v2/models/simple/infer', big);
    expect([declared.status, JSON.parse(declared.body.toString())]).toEqual([
      400,
      { error: `request body of ${big.length} bytes exceeds the HTTP input size limit of ${LIMIT} bytes` },
    ]);
    // Chunked, so the limit is found mid-stream; the rest is read and dropped and the next request is served.
    const chunked = Buffer.concat([
      Buffer.from(`POST /v2/models/simple/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n`),
      Buffer.from(`${(600).toString(16)}\r\n`),
      big.subarray(0, 600),
      Buffer.from('\r\n'),
      Buffer.from(`${(900).toString(16)}\r\n`),
      big.subarray(0, 900),
      Buffer.from('\r\n0\r\n\r\n'),
      rawRequest('/v2/models/simple/infer', jsonBody, { 'Content-Length': jsonBody.length }),
    ]);
    const { text } = await raw(small.port, chunked, 1000);
    expect(text.match(/HTTP\/1\.1 \d{3}/g)).toEqual(['HTTP/1.1 400', 'HTTP/1.1 200']);
    expect(text).toContain('exceeds the HTTP input size limit of 1000 bytes');
  });

  it('closes a connection whose oversized body never comes, as node-server does', async () => {
    const { text, closed } = await raw(
      small.port,
      rawRequest('/v2/models/simple/infer', Buffer.alloc(0), { 'Content-Length': 10 * LIMIT }),
      3000,
    );
    expect(text).toMatch(/^HTTP\/1\.1 400/);
    expect(closed).toBe(true);
  });

  it('survives clients that go away mid-body, logging no error for them (a cancel, not a server fault)', async () => {
    const lines: string[] = [];
    const spy = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      lines.push(String(chunk));
      return true;
    });
    try {
      await goAwayMidBody();
    } finally {
      spy.mockRestore();
    }
    expect(lines.filter((l) => l.startsWith('E') && l.includes('/v2/models/simple/infer'))).toEqual([]);
    expect((await send(engine.httpPort, 'POST', '/v2/models/simple/infer', binaryBody, binaryHeaders)).status).toBe(200);
  });

  async function goAwayMidBody(): Promise<void> {
    for (let i = 0; i < 5; i++) {
      const s = net.connect(engine.httpPort, '127.0.0.1');
      await new Promise<void>((r) => s.once('connect', () => r()));
      s.write(
        rawRequest('/v2/models/simple/infer', binaryBody.subarray(0, 100), { ...binaryHeaders, 'Content-Length': binaryBody.length }),
      );
      await new Promise((r) => setTimeout(r, 20));
      s.destroy();
    }
    await new Promise((r) => setTimeout(r, 50));
  }
});
