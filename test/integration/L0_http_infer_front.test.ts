// The engine's infer route on the lean HTTP/1.1 front
// (engine/frontends/http/direct-front.ts) against node:http: two HTTP
// frontends on one engine, one with the front and one without, get the same
// bytes over raw sockets and must answer with the same bytes (Date aside):
// binary and JSON infers, versions, escaped names, errors, keep-alive,
// pipelining, Connection: close, and the requests the front leaves to
// node:http (other routes first or in between, chunked bodies, odd heads,
// bodies over its limit). Plus: a client that goes away mid-call leaves the
// engine serving.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpServer, type RunningServer } from '../../engine/frontends/http/http-server.ts';
import type { RunningEngine } from '../../engine/server/server.ts';
import { i32Bytes, removeDir, startTestEngine, tempRepo } from './helpers.ts';
import { exchange, pieces, sameAsNodeHttp, type FrontCase } from '../fixtures/http1-exchange.ts';

let repo: string;
let engine: RunningEngine;
let front: RunningServer;
let plain: RunningServer;

const A = Array.from({ length: 16 }, (_, i) => 5 * i - 9);
const B = Array.from({ length: 16 }, (_, i) => 40 - i);
const header = JSON.stringify({
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
  ],
  parameters: { binary_data_output: true },
});
const BINARY = header + Buffer.concat([i32Bytes(A), i32Bytes(B)]).toString('latin1');
const JSON_BODY = JSON.stringify({
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: A },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: B },
  ],
});
const post = (target: string, body: string, fields = '') =>
  `POST ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n${fields}Content-Length: ${Buffer.byteLength(body, 'latin1')}\r\n\r\n${body}`;
const bin = (target = '/v2/models/simple/infer', extra = '') =>
  post(target, BINARY, `Inference-Header-Content-Length: ${header.length}\r\nContent-Type: application/octet-stream\r\n${extra}`);
const json = (target = '/v2/models/simple/infer', extra = '') => post(target, JSON_BODY, `Content-Type: application/json\r\n${extra}`);

beforeAll(async () => {
  repo = tempRepo('l0-http-front', ['simple']);
  engine = await startTestEngine({ modelRepository: repo, controlMode: 'explicit', loadModels: ['simple'] });
  front = await startHttpServer(engine.server, { port: 0, host: '127.0.0.1', http1Front: true, maxInputBytes: 4096 });
  plain = await startHttpServer(engine.server, { port: 0, host: '127.0.0.1', http1Front: false, maxInputBytes: 4096 });
});

afterAll(async () => {
  await front?.close();
  await plain?.close();
  await engine?.stop();
  removeDir(repo);
});

const CASES: FrontCase[] = [
  { name: 'binary infer', parts: [bin()], replies: 1, served: true },
  { name: 'JSON infer', parts: [json()], replies: 1, served: true },
  { name: 'a version', parts: [bin('/v2/models/simple/versions/1/infer')], replies: 1, served: true },
  { name: 'an escaped name', parts: [bin('/v2/models/si%6Dple/infer')], replies: 1, served: true },
  { name: 'a query', parts: [json('/v2/models/simple/infer?x=1')], replies: 1, served: true },
  { name: 'an unknown model', parts: [json('/v2/models/nope/infer')], replies: 1, served: true },
  { name: 'an unknown version', parts: [json('/v2/models/simple/versions/7/infer')], replies: 1, served: true },
  {
    name: 'a binary header longer than the body',
    parts: [post('/v2/models/simple/infer', BINARY, 'Inference-Header-Content-Length: 9999\r\n')],
    replies: 1,
    served: true,
  },
  {
    name: 'a binary header length that is not a number',
    parts: [post('/v2/models/simple/infer', BINARY, 'Inference-Header-Content-Length: x\r\n')],
    replies: 1,
    served: true,
  },
  { name: 'bad JSON', parts: [post('/v2/models/simple/infer', '{"inputs": [')], replies: 1, served: true },
  {
    name: 'a traceparent',
    parts: [json('/v2/models/simple/infer', 'traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\n')],
    replies: 1,
    served: true,
  },
  { name: 'three on one connection', parts: [bin(), json(), bin()], replies: 3, gapMs: 20, served: true },
  {
    name: 'a binary body in 30 pieces, 5 ms apart',
    parts: [bin().split('\r\n\r\n')[0] + '\r\n\r\n', ...pieces(BINARY, 30)],
    replies: 1,
    gapMs: 5,
    served: true,
  },
  { name: 'three pipelined', parts: [bin() + json() + bin()], replies: 3, served: true },
  { name: 'Connection: close', parts: [json('/v2/models/simple/infer', 'Connection: close\r\n')], replies: 1, served: true },
  {
    name: 'a health check between two infers (hand-over)',
    parts: [bin(), 'GET /v2/health/ready HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n', bin()],
    replies: 3,
    gapMs: 30,
    served: false,
  },
  { name: 'a stray % in the name', parts: [json('/v2/models/si%zzmple/infer')], replies: 1, served: false },
  { name: 'a dot segment', parts: [json('/v2/models/%2e%2e/infer')], replies: 1, served: false },
  { name: 'an upper-case Host', parts: [json().replace('Host: 127.0.0.1', 'Host: LOCALHOST')], replies: 1, served: false },
  {
    name: 'chunked',
    parts: [
      `POST /v2/models/simple/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n${JSON_BODY.length.toString(16)}\r\n${JSON_BODY}\r\n0\r\n\r\n`,
    ],
    replies: 1,
    served: false,
  },
  { name: 'a body over the input limit', parts: [post('/v2/models/simple/infer', 'x'.repeat(5000))], replies: 1, served: false },
  { name: 'bare LF', parts: [json().replace('Host: 127.0.0.1\r\n', 'Host: 127.0.0.1\n')], replies: 1, served: false },
];

describe('L0_http_infer_front', () => {
  it.each(CASES.map((c) => [c.name, c] as const))('%s: the same bytes back', async (_n, c) => {
    await sameAsNodeHttp(front, plain.port, c);
  });

  it('the binary reply carries the sums and differences', async () => {
    const r = await exchange(front.port, [bin()], 1);
    const text = r.replies[0]!;
    if (process.env.FRONT_DEBUG) console.log(JSON.stringify(text.slice(0, 400)));
    const body = Buffer.from(text.slice(text.indexOf('\r\n\r\n') + 4), 'latin1');
    const hl = Number(/Inference-Header-Content-Length: (\d+)/i.exec(text)![1]);
    const out = body.subarray(hl);
    const sums = Array.from({ length: 16 }, (_, i) => out.readInt32LE(i * 4));
    expect(sums).toEqual(A.map((a, i) => a + B[i]!));
  });

  it('clients that go away before their reply leave the front serving', async () => {
    for (let i = 0; i < 20; i++) {
      const s = net.connect(front.port, '127.0.0.1');
      s.on('error', () => undefined);
      s.write(bin() + bin());
      s.destroy();
    }
    const r = await exchange(front.port, [bin()], 1);
    expect(r.replies[0]).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
  });
});
