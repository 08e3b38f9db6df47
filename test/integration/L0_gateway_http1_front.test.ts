// The lean HTTP/1.1 front (net/http1/http1-front.ts, gateway/http/direct-front.ts)
// against node:http: two gateways on one real engine, one with the front and
// one with --http1-front=false, get the same bytes over raw sockets and must
// answer with the same bytes (Date aside) — plain calls, errors, requests the
// front hands to node:http (odd heads, other routes, chunked bodies, bodies
// arriving late), keep-alive and pipelining on one connection, a hand-over in
// the middle of a connection, Connection: close — and then fuzzed heads
// (fast-check) mixing valid fields with the bytes a smuggling attempt uses.
// Plus: the front did serve the plain ones (its counters), idle connections
// it holds close on time, and stop() closes them.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { setQuiet } from '../../common/logger.ts';
import { BUNDLED_REPO, startTestEngine } from './helpers.ts';
import { exchange, pieces, sameAsNodeHttp, type FrontCase } from '../fixtures/http1-exchange.ts';

let engine: RunningEngine;
let front: RunningGateway;
let plain: RunningGateway;
let fnDir: string;
let repo: string;

const row = (k: number) => Array.from({ length: 64 }, (_, i) => Math.sin(i * 0.3 + k));
const BODY = JSON.stringify({ inputs: { user_features: [row(1)] } });
const HEAD =
  'POST /fn/product_recommender HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-API-Key: k-one\r\nX-Request-Id: q1\r\n';
/** A complete request: `head` (request line and fields, each ending CRLF), Content-Length, the body. */
const req = (head: string, body = BODY, extra = '') => `${head}${extra}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

beforeAll(async () => {
  setQuiet(true);
  repo = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-front-repo-'));
  fs.cpSync(path.join(BUNDLED_REPO, 'product_recommender_model'), path.join(repo, 'product_recommender_model'), { recursive: true });
  engine = await startTestEngine({ modelRepository: repo, httpPort: -1, metricsPort: -1 });
  fnDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-front-fn-'));
  const rec = JSON.parse(fs.readFileSync(path.join(BUNDLED_REPO, '../functions/product_recommender.json'), 'utf8'));
  fs.writeFileSync(
    path.join(fnDir, 'product_recommender.json'),
    JSON.stringify({ ...rec, limits: { ...rec.limits, maxBodyBytes: 20_000 } }),
  );
  process.env.RECOMMENDER_API_KEYS = 'k-one';
  const common = {
    host: '127.0.0.1',
    port: 0,
    engine: `127.0.0.1:${engine.grpcPort}`,
    functions: fnDir,
    shmThreshold: 1 << 20,
    console: false,
    shm: false,
    timeouts: { idleMs: 1500 },
  };
  [front, plain] = await Promise.all([
    startGateway({ ...common, prefix: `gwf${process.pid}a` }),
    startGateway({ ...common, prefix: `gwf${process.pid}b`, transport: { http1Front: false } }),
  ]);
}, 120_000);

afterAll(async () => {
  await front?.stop();
  await plain?.stop();
  await engine?.stop();
  if (fnDir) fs.rmSync(fnDir, { recursive: true, force: true });
  if (repo) fs.rmSync(repo, { recursive: true, force: true });
  delete process.env.RECOMMENDER_API_KEYS;
});

const CASES: FrontCase[] = [
  { name: 'plain call', parts: [req(HEAD)], replies: 1, served: true },
  { name: 'three calls on one connection', parts: [req(HEAD), req(HEAD), req(HEAD)], replies: 3, gapMs: 20, served: true },
  { name: 'three calls pipelined in one write', parts: [req(HEAD) + req(HEAD) + req(HEAD)], replies: 3, served: true },
  { name: 'Connection: close', parts: [req(HEAD, BODY, 'Connection: close\r\n')], replies: 1, served: true },
  { name: 'Connection: keep-alive', parts: [req(HEAD, BODY, 'Connection: keep-alive\r\n')], replies: 1, served: true },
  {
    name: 'head, then the body 50 ms later',
    parts: [req(HEAD).split('\r\n\r\n')[0] + '\r\n\r\n', BODY],
    replies: 1,
    gapMs: 50,
    served: true,
  },
  {
    name: 'the body in 40 pieces, 5 ms apart',
    parts: [req(HEAD).split('\r\n\r\n')[0] + '\r\n\r\n', ...pieces(BODY, 40)],
    replies: 1,
    gapMs: 5,
    served: true,
  },
  {
    name: 'a call and the head of a second, then its body in 20 pieces',
    parts: [req(HEAD) + req(HEAD).split('\r\n\r\n')[0] + '\r\n\r\n', ...pieces(BODY, 20)],
    replies: 2,
    gapMs: 5,
    served: true,
  },
  {
    name: 'two pipelined calls in 60 pieces, 3 ms apart (a partial head: handed over)',
    parts: pieces(req(HEAD) + req(HEAD), 60),
    replies: 2,
    gapMs: 3,
    served: false,
  },
  { name: 'bad JSON', parts: [req(HEAD, '{"inputs": ')], replies: 1, served: true },
  { name: 'no key', parts: [req(HEAD.replace('X-API-Key: k-one\r\n', ''))], replies: 1, served: true },
  { name: 'unknown function', parts: [req(HEAD.replace('product_recommender', 'nope'))], replies: 1, served: true },
  {
    name: 'body over the function limit (413, closes)',
    parts: [req(HEAD, JSON.stringify({ inputs: { user_features: [row(1)] }, pad: 'x'.repeat(30_000) }))],
    replies: 1,
    served: true,
  },
  {
    name: 'a call, then a GET on the same connection (hand-over)',
    parts: [req(HEAD), 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n', req(HEAD)],
    replies: 3,
    gapMs: 30,
    served: false,
  },
  { name: 'HTTP/1.0', parts: [req(HEAD.replace('HTTP/1.1', 'HTTP/1.0'))], replies: 1, served: false },
  {
    name: 'chunked body',
    parts: [`${HEAD}Transfer-Encoding: chunked\r\n\r\n${BODY.length.toString(16)}\r\n${BODY}\r\n0\r\n\r\n`],
    replies: 1,
    served: false,
  },
  {
    name: 'Content-Length and Transfer-Encoding',
    parts: [`${HEAD}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`],
    replies: 1,
    served: false,
  },
  {
    name: 'two Content-Length fields',
    parts: [`${HEAD}Content-Length: ${BODY.length}\r\nContent-Length: 3\r\n\r\n${BODY}`],
    replies: 1,
    served: false,
  },
  { name: 'a repeated field', parts: [req(HEAD, BODY, 'X-API-Key: k-one\r\n')], replies: 1, served: false },
  { name: 'obs-fold', parts: [req(HEAD, BODY, 'X-Fold: a\r\n b\r\n')], replies: 1, served: false },
  { name: 'bare LF', parts: [req(HEAD, BODY, 'X-Bare: a\nX-Other: b\r\n')], replies: 1, served: false },
  { name: 'space before the colon', parts: [req(HEAD, BODY, 'X-Space : a\r\n')], replies: 1, served: false },
  { name: 'DEL in a value', parts: [req(HEAD.replace('q1', 'q\x7f1'))], replies: 1, served: false },
  { name: 'non-ASCII in a value', parts: [req(HEAD.replace('q1', 'q\xe91'))], replies: 1, served: false },
  { name: 'Expect: 100-continue', parts: [req(HEAD, BODY, 'Expect: 100-continue\r\n')], replies: 2, served: false },
  { name: 'lower-case method', parts: [req(HEAD.replace('POST', 'post'))], replies: 1, served: false },
  { name: 'query string', parts: [req(HEAD.replace('recommender ', 'recommender?x=1 '))], replies: 1, served: false },
  { name: 'absolute form target', parts: [req(HEAD.replace('/fn/', 'http://127.0.0.1/fn/'))], replies: 1, served: false },
  { name: 'no Host', parts: [req(HEAD.replace('Host: 127.0.0.1\r\n', ''))], replies: 1, served: false },
  { name: 'a GET first', parts: ['GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n', req(HEAD)], replies: 2, gapMs: 30, served: false },
  { name: 'text content type', parts: [req(HEAD.replace('application/json', 'text/plain'))], replies: 1, served: false },
  { name: 'async (Prefer)', parts: [req(HEAD, BODY, 'Prefer: respond-async\r\n')], replies: 1, served: false },
  { name: 'Connection: upgrade', parts: [req(HEAD, BODY, 'Connection: upgrade\r\nUpgrade: websocket\r\n')], replies: 1, served: false },
  { name: 'head over 8 KiB', parts: [req(HEAD, BODY, `X-Big: ${'a'.repeat(9000)}\r\n`)], replies: 1, served: false },
  {
    name: 'body over 64 KiB (node:http reads it)',
    parts: [req(HEAD, JSON.stringify({ inputs: { user_features: [row(1)] }, pad: 'x'.repeat(70_000) }))],
    replies: 1,
    served: false,
  },
  // As node:http (httpAllowHalfOpen false): the client's end aborts the calls in flight; no reply, the connection ends.
  { name: 'a call, then the client ends its side', parts: [req(HEAD)], replies: 0, served: true, halfClose: true },
  { name: 'two pipelined calls, then the client ends its side', parts: [req(HEAD) + req(HEAD)], replies: 0, served: true, halfClose: true },
  { name: 'a partial head, then the client ends its side', parts: [HEAD], replies: 1, served: false, halfClose: true },
  {
    name: 'a head without its whole body, then the client ends its side',
    parts: [req(HEAD).slice(0, -10)],
    replies: 1,
    served: false,
    halfClose: true,
  },
  { name: 'a partial head, then the rest', parts: [HEAD.slice(0, 30), req(HEAD).slice(30)], replies: 1, gapMs: 30, served: false },
];

/** A case of the table that waits 1.5 s: run beside the idle test below, which hands nothing to node:http. */
const LATE_BODY: FrontCase = {
  name: 'body 1.5 s after the head',
  parts: [req(HEAD).split('\r\n\r\n')[0] + '\r\n\r\n', BODY],
  replies: 1,
  gapMs: 1500,
  served: false,
};

/** A job's id (in its body, its status URL and Location) differs between any two gateways. */
const withoutJobIds = (x: string) => x.replace(/("id":"|\/jobs\/)[A-Za-z0-9_-]{24}/g, '$1<id>');

/** Generated heads per run of the fuzz property, sent at once (each exchange on its own connections). */
const FUZZ_BATCH = 10;

describe('the HTTP/1.1 front vs node:http', () => {
  it.each(CASES.map((c) => [c.name, c] as const))('%s: the same bytes back', async (_n, c) => {
    await sameAsNodeHttp(front, plain.port, c, withoutJobIds);
  });

  it('fuzzed heads: the same bytes back from both, and both gateways live on', async () => {
    const tchar = fc.constantFrom(...'abcxyzXYZ-_!#~09');
    const name = fc.oneof(
      fc.string({ unit: tchar, minLength: 1, maxLength: 8 }),
      fc.constantFrom('Transfer-Encoding', 'Content-Length', 'Connection', 'Host', 'X-API-Key', 'Content-Type', 'Expect', 'X Bad', ''),
    );
    const value = fc.oneof(
      fc.string({ maxLength: 12 }),
      fc.constantFrom(
        'chunked',
        'close',
        'keep-alive',
        ' 5',
        '5, 5',
        '-1',
        'k-one',
        'application/json',
        '\x00',
        'a\rb',
        'a\nb',
        '\ta\t',
        '\xff',
      ),
    );
    const field = fc.tuple(name, fc.constantFrom(':', ': ', ' :', ':\t'), value).map(([n, sep, v]) => `${n}${sep}${v}\r\n`);
    const line = fc.constantFrom(
      'POST /fn/product_recommender HTTP/1.1',
      'POST /fn/product_recommender HTTP/1.0',
      'POST  /fn/product_recommender HTTP/1.1',
      'POST /fn/product_recommender\tHTTP/1.1',
      'PUT /fn/product_recommender HTTP/1.1',
    );
    const heads = fc.array(fc.tuple(line, fc.array(field, { maxLength: 4 }), fc.boolean()), {
      minLength: FUZZ_BATCH,
      maxLength: FUZZ_BATCH,
    });
    await fc.assert(
      fc.asyncProperty(heads, async (batch) => {
        await Promise.all(
          batch.map(async ([l, fields, keyed]) => {
            const head = `${l}\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-Request-Id: f1\r\n${keyed ? 'X-API-Key: k-one\r\n' : ''}${fields.join('')}`;
            const bytes = req(head, BODY, 'Connection: close\r\n');
            const [a, b] = await Promise.all([exchange(front.port, [bytes], 1, 0, 1500), exchange(plain.port, [bytes], 1, 0, 1500)]);
            expect(a, JSON.stringify(bytes)).toEqual(b);
          }),
        );
      }),
      { numRuns: Math.ceil(Number(process.env.FUZZ_RUNS_FRONT ?? 120) / FUZZ_BATCH) },
    );
    const after = await exchange(front.port, [req(HEAD)], 1);
    expect(after.replies[0]).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
  }, 120_000);

  it('bytes after a Connection: close request are not read: the call gets its reply, then the connection closes', async () => {
    // node:http differs here when the bytes come before its reply: llhttp takes them as an error and the
    // call's reply becomes a 400. RFC 9112 (9.6) asks only that no further request be processed.
    // The later bytes come in a read of their own (30 ms after): arriving in one read with the first request, they
    // make the front hand that read to node:http (as any read whose later bytes node would refuse): a 400, as node's.
    const r = await exchange(front.port, [req(HEAD, BODY, 'Connection: close\r\n'), req(HEAD)], 2, 30, 3000);
    expect(r.replies).toHaveLength(1);
    expect(r.replies[0]).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(r.closed).toBe(true);
  });

  it('a client that pipelines 1500 calls and reads nothing for a while gets every reply, in order, once it reads', async () => {
    // Its replies fill the socket's buffers, so the front waits for 'drain' and stops reading (bounded memory)
    // instead of queueing the requests behind; reading again serves the rest.
    const n = 1500;
    const s = net.connect(front.port, '127.0.0.1');
    s.on('error', () => undefined);
    await new Promise<void>((r) => s.once('connect', () => r()));
    s.pause();
    const ids = Array.from({ length: n }, (_, i) => `p${i}`);
    const servedBefore = front.http1Front!.stats.served;
    s.write(ids.map((id) => req(HEAD.replace('q1', id))).join(''));
    // Reads nothing until the front has stopped serving (its count still for 200 ms: its replies fill the
    // socket buffers), or for the 1.5 s this always waited before.
    const counts: number[] = [];
    for (const end = Date.now() + 1500; Date.now() < end; ) {
      await new Promise((r) => setTimeout(r, 100));
      counts.push(front.http1Front!.stats.served - servedBefore);
      const [a, b, c] = counts.slice(-3);
      if (c === n || (c! > 0 && a === c && b === c)) break;
    }
    let got = Buffer.alloc(0);
    const seen: string[] = [];
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`only ${seen.length} replies`)), 30_000);
      s.on('data', (d: Buffer) => {
        got = Buffer.concat([got, d]);
        for (let at; (at = got.indexOf('\r\n\r\n')) >= 0; ) {
          const head = got.toString('latin1', 0, at);
          const len = Number(/content-length: (\d+)/.exec(head)![1]);
          if (got.length < at + 4 + len) break;
          expect(head).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
          seen.push(/x-request-id: (\S+)/.exec(head)![1]!);
          got = got.subarray(at + 4 + len);
        }
        if (seen.length === n) {
          clearTimeout(timer);
          resolve();
        }
      });
      s.resume();
    });
    s.destroy();
    expect(seen).toEqual(ids);
  }, 60_000);

  // The next two side by side (issue 38): the idle call is served by the front, so the late body's case
  // still sees exactly its own hand-over; neither times the other.
  it.concurrent(`${LATE_BODY.name}: the same bytes back`, async () => {
    await sameAsNodeHttp(front, plain.port, LATE_BODY, withoutJobIds);
  });

  it.concurrent('an idle connection the front holds is closed after the keep-alive timeout (1.5 s here)', async () => {
    const t0 = Date.now();
    const r = await exchange(front.port, [req(HEAD)], 2, 0, 4000);
    expect(r.replies).toHaveLength(1);
    expect(r.closed).toBe(true);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1400);
    expect(Date.now() - t0).toBeLessThan(3500);
  });

  it("calls whose client went away mid-body leave no call in flight: the gateways stop without waiting out the drain (this one; the front's in the next test)", async () => {
    // Head and part of the body, then the client goes: the request's 'close' can come before the direct route
    // reads the body (the function is resolved first); a reader waiting for it again held the drain for 10 s.
    await Promise.all(
      [front.port, plain.port].flatMap((port) =>
        Array.from(
          { length: 10 },
          () =>
            new Promise<void>((resolve) => {
              const s = net.connect(port, '127.0.0.1', () => s.write(req(HEAD).slice(0, -20)));
              s.on('error', () => undefined);
              s.on('close', () => resolve());
              setTimeout(() => s.destroy(), 300);
            }),
        ),
      ),
    );
    await new Promise((r) => setTimeout(r, 300));
    const t0 = Date.now();
    await plain.stop();
    expect(Date.now() - t0).toBeLessThan(3000); // the drain limit is 10 s
  });

  it('stop() closes the idle connections the front holds at once (last: it stops the gateway)', async () => {
    const s = net.connect(front.port, '127.0.0.1');
    const closed = new Promise<void>((r) => s.on('close', () => r()));
    s.on('error', () => undefined);
    const replied = new Promise<void>((r) => s.once('data', () => r()));
    s.write(req(HEAD));
    await replied;
    expect(front.http1Front!.connections).toBeGreaterThanOrEqual(1);
    const t0 = Date.now();
    await front.stop();
    await closed;
    expect(Date.now() - t0).toBeLessThan(1000); // the idle timeout here is 1.5 s: the close did not wait for it
    expect(front.http1Front!.connections).toBe(0);
  });
});
