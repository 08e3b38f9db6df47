// The console's pure helpers (counter deltas, histogram quantiles, chart
// points, config digests), its sampler with an injected clock and source,
// and its routes through Hono's app.request(): token rules, cached assets,
// page shells, and the JSON the pages poll.
import { Hono } from 'hono';
import type { GatewayEnv } from '../../gateway/core/gateway-env.ts';
import { describe, expect, it } from 'vitest';
import { configDigest, jobRow, type ConsoleEngine } from '../../gateway/console/console-api.ts';
import { mountConsole } from '../../gateway/console/console-routes.ts';
import { ConsoleSampler, readSnapshot } from '../../gateway/console/console-sampler.ts';
import {
  bucketDelta,
  counterDelta,
  derivePoint,
  histogramQuantile,
  modelCounters,
  type Snapshot,
} from '../../gateway/console/stats-series.ts';
import { gatewayError } from '../../gateway/core/errors.ts';
import { MemoryJobQueue } from '../../gateway/jobs/memory-job-queue.ts';
import { GatewayMetrics } from '../../gateway/core/metrics.ts';

const statsRow = (name: string, inferences: number, executions: number, successNs: number, queueNs: number) => ({
  name,
  version: '1',
  inference_count: String(inferences),
  execution_count: String(executions),
  inference_stats: {
    success: { count: String(inferences), ns: String(successNs) },
    queue: { count: String(inferences), ns: String(queueNs) },
  },
  memory_usage: [{ type: 'CPU', id: 0, byte_size: '2048' }],
});

describe('stats-series', () => {
  it('counterDelta counts a reset counter from zero', () => {
    expect(counterDelta(10, 15)).toBe(5);
    expect(counterDelta(undefined, 7)).toBe(7);
    expect(counterDelta(100, 3)).toBe(3);
  });

  it('histogramQuantile interpolates inside the bucket, like histogram_quantile', () => {
    // 10 observations: 4 ≤ 0.01, 4 in (0.01, 0.1], 2 in (0.1, 1]
    const b: Array<[number, number]> = [
      [0.01, 4],
      [0.1, 8],
      [1, 10],
      [Infinity, 10],
    ];
    expect(histogramQuantile(0.5, b)).toBeCloseTo(0.01 + 0.09 * (1 / 4), 10);
    expect(histogramQuantile(0.2, b)).toBeCloseTo(0.005, 10);
    expect(histogramQuantile(0.95, b)).toBeCloseTo(0.1 + 0.9 * (1.5 / 2), 10);
    expect(
      histogramQuantile(0.5, [
        [0.01, 0],
        [Infinity, 0],
      ]),
    ).toBeNull();
    // Everything above the largest bound: report that bound.
    expect(
      histogramQuantile(0.5, [
        [0.01, 0],
        [1, 0],
        [Infinity, 5],
      ]),
    ).toBe(1);
  });

  it('bucketDelta subtracts per bucket, and starts afresh after a reset', () => {
    expect(
      bucketDelta(
        [
          [1, 2],
          [Infinity, 3],
        ],
        [
          [1, 5],
          [Infinity, 9],
        ],
      ),
    ).toEqual([
      [1, 3],
      [Infinity, 6],
    ]);
    expect(
      bucketDelta(
        [
          [1, 5],
          [Infinity, 9],
        ],
        [
          [1, 1],
          [Infinity, 1],
        ],
      ),
    ).toEqual([
      [1, 1],
      [Infinity, 1],
    ]);
  });

  it('derivePoint turns two snapshots into rates and means', () => {
    const a: Snapshot = {
      at: 10_000,
      models: modelCounters([statsRow('m', 10, 5, 10e6, 2e6)]),
      functions: {
        f: {
          buckets: [
            [0.01, 1],
            [0.1, 1],
            [Infinity, 1],
          ],
        },
      },
      bytes: { staged: 1000, inline: 10 },
    };
    const b: Snapshot = {
      at: 12_000,
      models: modelCounters([statsRow('m', 30, 10, 50e6, 12e6), statsRow('new', 4, 4, 4e6, 0)]),
      functions: {
        f: {
          buckets: [
            [0.01, 3],
            [0.1, 5],
            [Infinity, 5],
          ],
        },
      },
      bytes: { staged: 5000, inline: 30 },
    };
    const p = derivePoint(a, b);
    expect(p.t).toBe(12);
    expect(p.models.m).toEqual({ rps: 10, latencyMs: 2, queueMs: 0.5, batch: 4 });
    expect(p.models.new).toEqual({ rps: 2, latencyMs: 1, queueMs: 0, batch: 1 });
    expect(p.functions.f!.rps).toBe(2);
    expect(p.functions.f!.p50Ms).toBeCloseTo(10, 6); // rank 2 of 4 new observations: the top of the first bucket
    expect(p.functions.f!.p95Ms).toBeCloseTo((0.01 + 0.09 * (1.8 / 2)) * 1000, 6);
    expect(p.bytes).toEqual({ stagedPerS: 2000, inlinePerS: 10 });
    // No executions in the interval: means are gaps, not zeros.
    const idle = derivePoint(b, { ...b, at: 14_000 });
    expect(idle.models.m).toEqual({ rps: 0, latencyMs: null, queueMs: null, batch: null });
  });

  it('modelCounters sums the versions of a model', () => {
    const c = modelCounters([statsRow('m', 1, 1, 1, 1), { ...statsRow('m', 2, 1, 3, 4), version: '2' }]);
    expect(c.m).toEqual({ inferences: 3, executions: 2, successCount: 3, successNs: 4, queueCount: 3, queueNs: 5 });
  });

  it('configDigest reads instances, batching and ensemble steps', () => {
    const d = configDigest({
      platform: 'onnxruntime_onnx',
      max_batch_size: 8,
      instance_group: [
        { count: 2, kind: 'KIND_CPU' },
        { count: 1, kind: 1 },
      ],
      dynamic_batching: { preferred_batch_size: [4, 8], max_queue_delay_microseconds: '100' },
    });
    expect(d).toEqual({
      platform: 'onnxruntime_onnx',
      maxBatchSize: 8,
      instances: [
        { count: 2, kind: 'KIND_CPU' },
        { count: 1, kind: 'KIND_GPU' },
      ],
      dynamicBatching: { preferred: [4, 8], maxQueueDelayUs: 100 },
      ensembleSteps: null,
    });
    expect(
      configDigest({ platform: 'ensemble', ensemble_scheduling: { step: [{ model_name: 'a' }, { model_name: 'b' }] } })?.ensembleSteps,
    ).toEqual(['a', 'b']);
  });
});

describe('ConsoleSampler', () => {
  it('adds a point per sample after the first, keeps the last N, and leaves a gap when the source fails', async () => {
    let t = 0;
    let n = 0;
    let fail = false;
    const s = new ConsoleSampler(
      async () => {
        if (fail) throw new Error('engine away');
        n += 10;
        return {
          at: (t += 1000),
          models: { m: { inferences: n, executions: n, successCount: n, successNs: 0, queueCount: n, queueNs: 0 } },
          functions: {},
          bytes: { staged: 0, inline: 0 },
        };
      },
      { keep: 3 },
    );
    await s.sample();
    expect(s.look()).toHaveLength(0);
    s.stop();
    for (let i = 0; i < 4; i++) await s.sample();
    const pts = s.look();
    s.stop();
    expect(pts.map((p) => p.t)).toEqual([3, 4, 5]);
    expect(pts.every((p) => p.models.m!.rps === 10)).toBe(true);
    fail = true;
    await s.sample();
    fail = false;
    await s.sample(); // first sample after the outage: no point across the gap
    expect(s.look()).toHaveLength(3);
    s.stop();
  });

  it('readSnapshot sums the latency histogram over transfers and reads the byte counters', async () => {
    const m = new GatewayMetrics({ engineUp: () => true, storeUp: () => true });
    m.observe('f', 200, 'inline', 0.003);
    m.observe('f', 200, 'shm', 0.2);
    m.stagedBytes.inc({ direction: 'in' }, 100);
    m.stagedBytes.inc({ direction: 'out' }, 20);
    m.inlineBytes.inc({ direction: 'in' }, 7);
    const snap = await readSnapshot({ modelStatistics: async () => [statsRow('m', 1, 1, 1, 1)], metrics: m, now: () => 42 });
    expect(snap.at).toBe(42);
    expect(snap.bytes).toEqual({ staged: 120, inline: 7 });
    const b = snap.functions.f!.buckets;
    expect(b.at(-1)).toEqual([Infinity, 2]);
    expect(b.find(([le]) => le === 0.005)![1]).toBe(1);
    expect(snap.models.m!.inferences).toBe(1);
  });
});

describe('console routes', () => {
  const engine: ConsoleEngine = {
    address: '127.0.0.1:1',
    up: true,
    check: async () => true,
    listModels: async () => [
      { name: 'ok', version: '1', state: 'READY', reason: '' },
      { name: 'broken', version: '1', state: 'UNAVAILABLE', reason: 'config.pbtxt:3:1: bad' },
    ],
    modelConfig: async () => ({ platform: 'onnxruntime_onnx', max_batch_size: 4, instance_group: [{ count: 1, kind: 'KIND_CPU' }] }),
    modelStatistics: async () => [statsRow('ok', 0, 0, 0, 0)],
  };
  const registry = {
    version: 'v1',
    list: async () => ({
      functions: [],
      unavailable: [{ name: 'f', reason: gatewayError('FUNCTION_UNAVAILABLE', { name: 'f', model: 'broken' }).message }],
    }),
  };
  /** @hono/node-server's bindings as a request from `remoteAddress` would carry them. */
  const from = (remoteAddress: string) => ({ incoming: { socket: { remoteAddress } } });
  function app(tokens: { console?: string; admin?: string } = {}, peer = '127.0.0.1') {
    const hono = new Hono<GatewayEnv>();
    hono.onError((err, c) => c.json((err as ReturnType<typeof gatewayError>).toJSON(), (err as ReturnType<typeof gatewayError>).status));
    const jobs = new MemoryJobQueue();
    const ui = mountConsole(hono, { engine, registry, jobs, consoleToken: () => tokens.console, adminToken: () => tokens.admin });
    // Requests come from `peer` unless a test says otherwise.
    const a = { request: (p: string, init?: RequestInit, env: object = from(peer)) => hono.request(p, init, env) };
    return { a, jobs, ui };
  }

  it('serves page shells with hashed asset links, and assets with immutable caching and ETags', async () => {
    const { a, ui } = app();
    const page = await a.request('/console/live');
    expect(page.status).toBe(200);
    const text = await page.text();
    expect(text).toContain('aria-current="page"');
    const src = /src="(\/console\/static\/uplot\.js\?v=[0-9a-f]{12})"/.exec(text)![1]!;
    const asset = await a.request(src);
    expect(asset.status).toBe(200);
    expect(asset.headers.get('cache-control')).toContain('immutable');
    expect(asset.headers.get('content-type')).toContain('javascript');
    expect((await asset.text()).length).toBeGreaterThan(10_000);
    const again = await a.request(src, { headers: { 'If-None-Match': asset.headers.get('etag')! } });
    expect(again.status).toBe(304);
    expect((await a.request('/console/static/nope.js')).status).toBe(404);
    ui.stop();
  });

  it('without GATEWAY_CONSOLE_TOKEN every console route answers loopback clients only, judged by the socket, never a header', async () => {
    const local = app().a;
    expect((await local.request('/console/api/overview')).status).toBe(200);
    const page = await local.request('/console/jobs');
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('answers requests from this machine only (loopback)');
    expect((await app({}, '::1').a.request('/console/api/jobs')).status).toBe(200);
    expect((await app({}, '::ffff:127.0.0.1').a.request('/console/api/jobs')).status).toBe(200);
    const remote = app({}, '192.0.2.7').a;
    for (const p of ['/console', '/console/jobs', '/console/api/jobs', '/console/api/overview', '/console/static/console.js']) {
      const r = await remote.request(p, { headers: { 'X-Forwarded-For': '127.0.0.1', 'X-Real-IP': '127.0.0.1' } });
      expect([p, r.status, ((await r.json()) as any).error.code]).toEqual([p, 403, 'CONSOLE_LOCAL_ONLY']);
    }
    expect((await app({}, '::ffff:10.0.0.1').a.request('/console/api/jobs')).status).toBe(403);
    // No socket at all (not served by @hono/node-server): not local.
    expect((await local.request('/console/api/jobs', {}, {})).status).toBe(403);
    // A local proxy's clients are not local: a loopback peer with a forwarding header is refused.
    for (const h of ['X-Forwarded-For', 'Forwarded', 'X-Real-IP']) {
      const r = await local.request('/console/api/jobs', { headers: { [h]: h === 'Forwarded' ? 'for=127.0.0.1' : '127.0.0.1' } });
      expect([h, r.status]).toEqual([h, 403]);
    }
  });

  it('read-only API needs GATEWAY_CONSOLE_TOKEN (or the admin token) when set, from any host', async () => {
    const { a } = app({ console: 'view', admin: 'adm' }, '192.0.2.7');
    const none = await a.request('/console/api/overview');
    expect([none.status, ((await none.json()) as any).error.code]).toEqual([401, 'CONSOLE_TOKEN_MISSING']);
    const bad = await a.request('/console/api/jobs', { headers: { 'X-Console-Token': 'nope' } });
    expect([bad.status, ((await bad.json()) as any).error.code]).toEqual([403, 'CONSOLE_TOKEN_INVALID']);
    expect((await a.request('/console/api/jobs', { headers: { 'X-Console-Token': 'view' } })).status).toBe(200);
    expect((await a.request('/console/api/jobs', { headers: { 'X-Console-Token': 'adm' } })).status).toBe(200);
    // Page shells carry no data, so they stay reachable and ask for the token themselves.
    const page = await a.request('/console');
    expect(page.status).toBe(200);
    expect(await page.text()).not.toContain('answers requests from this machine only');
  });

  it('overview reports states with reasons, config digests, memory and unavailable functions', async () => {
    const body = (await (await app().a.request('/console/api/overview')).json()) as any;
    expect(body.engine).toMatchObject({ ready: true, address: '127.0.0.1:1' });
    expect(body.models[0]).toMatchObject({ name: 'ok', state: 'READY', memoryBytes: 2048, config: { maxBatchSize: 4 } });
    expect(body.models[1]).toMatchObject({ name: 'broken', state: 'UNAVAILABLE', reason: 'config.pbtxt:3:1: bad', config: null });
    expect(body.unavailable[0].reason).toContain("target model 'broken' is not ready");
  });

  it('jobs lists recent jobs newest first without payloads', async () => {
    const { a, jobs } = app();
    const first = await jobs.enqueue({ fn: 'f', payload: { secret: 1 }, retentionMs: 60_000 });
    await new Promise((r) => setTimeout(r, 2));
    const second = await jobs.enqueue({
      fn: 'g',
      payload: {},
      retentionMs: 60_000,
      callback: { url: 'https://x/', maxAttempts: 3, backoffMs: 1, maxBackoffMs: 1, attemptTimeoutMs: 1 },
    });
    const body = (await (await a.request('/console/api/jobs')).json()) as any;
    expect(body.jobs.map((j: any) => j.id)).toEqual([second.id, first.id]);
    expect(body.jobs[0]).toEqual(jobRow(second));
    expect(JSON.stringify(body)).not.toContain('secret');
    expect(body.jobs[0].callback).toEqual({ url: 'https://x/', attempts: 0, maxAttempts: 3 });
  });

  it('the job list never carries results, key hashes or a callback URL’s query', async () => {
    const { a, jobs } = app();
    const cb = {
      url: 'https://hooks.example/in?token=hook-secret#frag',
      maxAttempts: 3,
      backoffMs: 1,
      maxBackoffMs: 1,
      attemptTimeoutMs: 1,
    };
    const rec = await jobs.enqueue({ fn: 'f', payload: {}, retentionMs: 60_000, keyHash: 'KEYHASH-must-not-show', callback: cb });
    await jobs.update(rec, 'running');
    const done = await jobs.get(rec.id);
    await jobs.update(done!, 'succeeded', { status: 200, result: { outputs: { y: 'RESULT-must-not-show' } } });
    const text = await (await a.request('/console/api/jobs')).text();
    expect(text).toContain(rec.id);
    for (const secret of ['RESULT-must-not-show', 'KEYHASH-must-not-show', 'hook-secret', 'frag']) expect(text).not.toContain(secret);
    expect(JSON.parse(text).jobs[0]).toMatchObject({ status: 'succeeded', httpStatus: 200, callback: { url: 'https://hooks.example/in' } });
  });
});
