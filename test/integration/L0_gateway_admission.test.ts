// Calls in flight per connection and per gateway (gateway/http/call-admission.ts,
// issue 41): a real engine, gateways on both HTTP/1.1 fronts, clients that
// pipeline hundreds of /fn calls in one write. The bounds hold (never more in
// flight than the settings), every request gets exactly one reply (200, or
// 503 GATEWAY_BUSY with Retry-After), and another client's calls meanwhile
// all succeed. A gateway with the bounds off shows what they prevent (the
// whole pipeline in flight at once), so the bounded cases can fail.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import type { GatewayOptions } from '../../gateway/options.ts';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { setQuiet } from '../../common/logger.ts';
import { BUNDLED_REPO, startTestEngine } from './helpers.ts';

let engine: RunningEngine;
let fnDir: string;
let repo: string;
const started: RunningGateway[] = [];

const row = (k: number) => Array.from({ length: 64 }, (_, i) => Math.sin(i * 0.3 + k));
const BODY = JSON.stringify({ inputs: { user_features: [row(1)] } });
const CALL = `POST /fn/product_recommender HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(BODY)}\r\n\r\n${BODY}`;

beforeAll(async () => {
  setQuiet(true);
  repo = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-adm-repo-'));
  fs.cpSync(path.join(BUNDLED_REPO, 'product_recommender_model'), path.join(repo, 'product_recommender_model'), { recursive: true });
  engine = await startTestEngine({ modelRepository: repo, httpPort: -1, metricsPort: -1 });
  fnDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-adm-fn-'));
  const rec = JSON.parse(fs.readFileSync(path.join(BUNDLED_REPO, '../functions/product_recommender.json'), 'utf8'));
  fs.writeFileSync(path.join(fnDir, 'product_recommender.json'), JSON.stringify({ ...rec, auth: undefined }));
}, 120_000);

afterAll(async () => {
  for (const g of started) await g.stop();
  await engine?.stop();
  if (fnDir) fs.rmSync(fnDir, { recursive: true, force: true });
  if (repo) fs.rmSync(repo, { recursive: true, force: true });
});

async function gateway(o: GatewayOptions): Promise<RunningGateway> {
  const g = await startGateway({
    host: '127.0.0.1',
    port: 0,
    engine: `127.0.0.1:${engine.grpcPort}`,
    functions: fnDir,
    console: false,
    shm: false,
    prefix: `gwadm${process.pid}n${started.length}`,
    ...o,
  });
  started.push(g);
  return g;
}

interface Replies {
  statuses: number[];
  retryAfter: number;
  codes: Set<string>;
}

/** Writes `count` calls in one write on one connection and reads until `count` replies came (or 20 s). */
function pipeline(port: number, count: number): Promise<Replies> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let text = '';
    const timer = setTimeout(
      () => finish(new Error(`only ${(text.match(/HTTP\/1\.1 \d{3}/g) ?? []).length} of ${count} replies in 20 s`)),
      20_000,
    );
    const finish = (err?: Error) => {
      clearTimeout(timer);
      s.destroy();
      if (err) return reject(err);
      const statuses = [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));
      resolve({
        statuses,
        retryAfter: (text.match(/\r\nretry-after: 1\r\n/gi) ?? []).length,
        codes: new Set([...text.matchAll(/"code":"([A-Z_]+)"/g)].map((m) => m[1]!)),
      });
    };
    s.setEncoding('latin1');
    s.on('data', (d: string) => {
      text += d;
      if ((text.match(/HTTP\/1\.1 \d{3}/g) ?? []).length >= count && text.endsWith('}')) finish();
    });
    s.on('error', (e) => finish(e));
    s.write(CALL.repeat(count));
  });
}

/** Sequential calls from another client while the flood runs: every status and the slowest time. */
async function otherClient(port: number, n: number): Promise<{ statuses: number[]; maxMs: number }> {
  const statuses: number[] = [];
  let maxMs = 0;
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const r = await fetch(`http://127.0.0.1:${port}/fn/product_recommender`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: BODY,
    });
    await r.text();
    statuses.push(r.status);
    maxMs = Math.max(maxMs, performance.now() - t0);
  }
  return { statuses, maxMs };
}

describe('L0_gateway_admission', () => {
  it('without bounds (the behaviour before issue 41) node:http runs a whole pipeline at once', async () => {
    const g = await gateway({ transport: { http1Front: false }, admission: { perConnection: Infinity, total: Infinity } });
    const r = await pipeline(g.port, 300);
    expect(r.statuses.length).toBe(300);
    expect(g.admission.peakPerConnection).toBeGreaterThan(20);
  }, 30_000);

  it('node:http: a pipeline runs at most perConnection at a time, waits behind them, and past the queue is refused 503 with Retry-After', async () => {
    const g = await gateway({ transport: { http1Front: false }, admission: { perConnection: 2, perConnectionQueue: 16, total: 64 } });
    const [flood, other] = await Promise.all([pipeline(g.port, 400), otherClient(g.port, 20)]);
    expect(flood.statuses.length).toBe(400);
    expect(g.admission.peakPerConnection).toBeLessThanOrEqual(2);
    const ok = flood.statuses.filter((s) => s === 200).length;
    const busy = flood.statuses.filter((s) => s === 503).length;
    expect(ok + busy).toBe(400);
    expect(ok).toBeGreaterThanOrEqual(18); // the two running and the sixteen waiting at least
    expect(busy).toBeGreaterThan(0);
    expect(flood.retryAfter).toBe(busy);
    expect([...flood.codes]).toEqual(['GATEWAY_BUSY']);
    expect(g.admission.refused.connection).toBe(busy);
    expect(other.statuses).toEqual(Array(20).fill(200));
    expect(other.maxMs).toBeLessThan(5000); // generous: a loaded 2-core host; before the bounds a flood stalled others for seconds
    expect(g.admission.inFlight).toBe(0);
  }, 30_000);

  it.each([
    ['node:http', false],
    ['the lean front', true],
  ])(
    '%s: calls past the gateway-wide bound are refused 503 GATEWAY_BUSY at once',
    async (_name, http1Front) => {
      const g = await gateway({ transport: { http1Front }, admission: { perConnection: 2, perConnectionQueue: 200, total: 2 } });
      const floods = await Promise.all([pipeline(g.port, 100), pipeline(g.port, 100), pipeline(g.port, 100)]);
      const all = floods.flatMap((f) => f.statuses);
      expect(all.length).toBe(300);
      expect(all.every((s) => s === 200 || s === 503)).toBe(true);
      expect(g.admission.peak).toBeLessThanOrEqual(2);
      expect(g.admission.inFlight).toBe(0);
      const busy = all.filter((s) => s === 503).length;
      expect(busy).toBeGreaterThan(0); // three connections' calls overlap, two slots
      expect(g.admission.refused.total).toBe(busy);
      if (http1Front) expect(g.http1Front!.stats.served).toBeGreaterThan(0);
      const metrics = await (await fetch(`http://127.0.0.1:${g.port}/metrics`)).text();
      expect(metrics).toContain(`gateway_calls_refused_busy{scope="gateway"} ${busy}`);
      expect(metrics).toMatch(/gateway_calls_in_flight 0/);
    },
    30_000,
  );
});
