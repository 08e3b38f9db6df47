// The gateway's read of the engine's HTTP repository index for cold loads and
// evictions (gateway/upstream/engine-loads.ts through EngineClient.modelLoads): a real
// HTTP server on loopback that, like a restricted engine, answers only with
// GATEWAY_ENGINE_KEY's pair as a header; rows mapped, absent fields null.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineClient } from '../../gateway/upstream/engine-client.ts';

let server: http.Server;
let address: string;
const seen: Array<{ method?: string; url?: string; key?: string | string[] }> = [];

beforeAll(async () => {
  server = http.createServer((req, res) => {
    seen.push({ method: req.method, url: req.url, key: req.headers['admin-key'] });
    req.resume();
    if (req.headers['admin-key'] !== 's3cret') {
      res.writeHead(403, { 'content-type': 'application/json' }).end('{"error":"This API is restricted, expecting header \'admin-key\'"}');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify([
        { name: 'm0', version: '1', state: 'UNAVAILABLE', cold_loads: 2, last_cold_load_ms: 41, evicted: 1 },
        { name: 'plain', version: '1', state: 'READY' },
      ]),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise<void>((r) => server.close(() => r())));

describe('EngineClient.modelLoads', () => {
  it('sends the engine key pairs as headers and maps the rows', async () => {
    const c = new EngineClient('127.0.0.1:1', { httpAddress: address, engineKey: 'Admin-Key=s3cret' });
    try {
      expect(await c.modelLoads()).toEqual([
        { name: 'm0', version: '1', coldLoads: 2, lastColdLoadMs: 41, evictions: 1 },
        { name: 'plain', version: '1', coldLoads: null, lastColdLoadMs: null, evictions: null },
      ]);
      expect(seen.at(-1)).toEqual({ method: 'POST', url: '/v2/repository/index', key: 's3cret' });
    } finally {
      c.close();
    }
  });

  it('a refusal names the engine address and status; no HTTP address means no figures', async () => {
    const c = new EngineClient('127.0.0.1:1', { httpAddress: address, engineKey: 'admin-key=wrong' });
    const none = new EngineClient('127.0.0.1:1', { httpAddress: '' });
    try {
      await expect(c.modelLoads()).rejects.toThrow(`engine HTTP index at http://${address}: HTTP 403`);
      expect(await none.modelLoads()).toBeUndefined();
    } finally {
      c.close();
      none.close();
    }
  });
});
