// Usage plans on the real engine with two gateways sharing a real Redis: a
// 50 rps plan refuses the calls past it from either gateway with 429,
// Retry-After and RateLimit-* headers; a daily quota holds exactly through a
// gateway restart; a retried request id counts once; the key's owner and the
// operator read the plan and its usage.
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { GatewayOptions } from '../../gateway/options.ts';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { keyId } from '../../gateway/plans/usage-plan.ts';
import { setQuiet } from '../../common/logger.ts';
import { TestRedis } from './L0_gateway-support.ts';
import { removeDir, startTestEngine } from './helpers.ts';
import { TOKEN, admin, callF, functionDir, url, writeEchoModel } from './L0_delivery-support.ts';

// The environment this file stubs goes back after it (tests share a worker process: vitest.config.ts).
afterAll(() => vi.unstubAllEnvs());

let engine: Awaited<ReturnType<typeof startTestEngine>>;
let redis: TestRedis;
let repo: string;
let fnDir: string;
let opts: GatewayOptions;
let A: RunningGateway;
let B: RunningGateway;

const RATE_KEY = 'key-rate-0001';
const QUOTA_KEY = 'key-quota-0002';
const FREE_KEY = 'key-free-0003';

beforeAll(async () => {
  setQuiet(true);
  vi.stubEnv('GATEWAY_ADMIN_TOKEN', TOKEN);
  vi.stubEnv('PLAN_TEST_KEYS', [RATE_KEY, QUOTA_KEY, FREE_KEY].join(','));
  repo = fs.mkdtempSync('/tmp/gw-plans-');
  writeEchoModel(repo, 'echo_a');
  engine = await startTestEngine({ modelRepository: repo, httpPort: -1, metricsPort: -1 });
  redis = await TestRedis.start();
  fnDir = functionDir('PLAN_TEST_KEYS');
  opts = {
    port: 0,
    host: '127.0.0.1',
    engine: `127.0.0.1:${engine.grpcPort}`,
    functions: fnDir,
    shm: false,
    redisUrl: redis.url,
    leaseNamespace: 'gwplans',
    console: false,
    planPollMs: 100,
  };
  A = await startGateway(opts);
  B = await startGateway(opts);
}, 120_000);

afterAll(async () => {
  try {
    await Promise.allSettled([A?.stop(), B?.stop()]);
  } finally {
    await redis?.stop();
    await engine?.stop();
  }
  removeDir(repo);
  removeDir(fnDir);
});

describe('usage plans', () => {
  it('refuses a bad plan and changes nothing', async () => {
    const bad = await admin(A, 'PUT', `/admin/plans/${keyId(RATE_KEY)}`, { name: 'p', rps: -1, burst: 5 });
    expect([bad.status, bad.body.error.code]).toEqual([400, 'PLAN_INVALID']);
    const badId = await admin(A, 'PUT', '/admin/plans/not-an-id', { name: 'p', rps: 1, burst: 5 });
    expect(badId.body.error.code).toBe('PLAN_INVALID');
    expect((await admin(B, 'GET', '/admin/plans')).body.plans).toEqual([]);
  });

  it('a 50 rps plan gets 429s past its rate from either gateway, with Retry-After and RateLimit headers', async () => {
    const set = await admin(A, 'PUT', `/admin/plans/${keyId(RATE_KEY)}`, { name: 'fifty', rps: 50, burst: 50 });
    expect(set.status).toBe(200);
    // B re-reads plans every 100 ms: wait until it knows this one (a loaded machine can stretch that).
    for (const deadline = Date.now() + 10_000; ; ) {
      const seen = (await (await fetch(url(B, '/usage'), { headers: { 'X-API-Key': RATE_KEY } })).json()) as {
        plan: { name: string } | null;
      };
      if (seen.plan?.name === 'fifty') break;
      if (Date.now() > deadline) throw new Error('gateway B did not read the plan within 10 s');
      await new Promise((r) => setTimeout(r, 20));
    }
    const t0 = performance.now();
    const res = await Promise.all(Array.from({ length: 200 }, (_, i) => callF(i % 2 ? A : B, { 'X-API-Key': RATE_KEY })));
    const elapsedS = (performance.now() - t0) / 1000;
    const ok = res.filter((r) => r.status === 200).length;
    const limited = res.filter((r) => r.status === 429);
    expect(ok).toBeGreaterThanOrEqual(50);
    expect(ok).toBeLessThanOrEqual(50 + Math.ceil(50 * elapsedS) + 1);
    expect(limited.length).toBe(200 - ok);
    const byGateway = new Set(res.map((r, i) => (r.status === 429 ? i % 2 : -1)));
    expect(byGateway.has(0) && byGateway.has(1)).toBe(true);
    const h = limited[0]!.headers;
    expect(limited[0]!.body.error.code).toBe('RATE_LIMITED');
    expect(Number(h.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(h.get('ratelimit-limit')).toBe('50');
    expect(h.get('ratelimit-remaining')).toBe('0');
    expect(Number(h.get('ratelimit-reset'))).toBeGreaterThanOrEqual(1);
    expect(h.get('ratelimit-policy')).toBe('50;w=1;burst=50');
    // A key without a plan is not limited.
    const free = await Promise.all(Array.from({ length: 80 }, () => callF(A, { 'X-API-Key': FREE_KEY })));
    expect(free.every((r) => r.status === 200)).toBe(true);
  }, 30_000);

  it('a daily quota holds exactly through a gateway restart; a retried request id counts once', async () => {
    await admin(A, 'PUT', `/admin/plans/${keyId(QUOTA_KEY)}`, {
      name: 'thirty-a-day',
      rps: 1000,
      burst: 1000,
      quota: { period: 'day', limit: 30 },
    });
    await new Promise((r) => setTimeout(r, 300));
    const k = { 'X-API-Key': QUOTA_KEY };
    const first = await Promise.all(Array.from({ length: 20 }, (_, i) => callF(i % 2 ? A : B, k)));
    expect(first.every((r) => r.status === 200)).toBe(true);
    // A retry of one request id on the other gateway does not count again.
    expect((await callF(A, { ...k, 'X-Request-Id': 'retry-me' })).status).toBe(200);
    expect((await callF(B, { ...k, 'X-Request-Id': 'retry-me' })).status).toBe(200);
    await A.stop();
    A = await startGateway(opts);
    const second = await Promise.all(Array.from({ length: 20 }, (_, i) => callF(i % 2 ? A : B, k)));
    expect(second.filter((r) => r.status === 200).length).toBe(9); // 30 - 20 - 1 (the retried id once)
    const over = second.find((r) => r.status === 429)!;
    expect(over.body.error.code).toBe('QUOTA_EXCEEDED');
    expect(over.headers.get('ratelimit-limit')).toBe('30');
    expect(Number(over.headers.get('retry-after'))).toBeLessThanOrEqual(86_400);
    // The retried id is still free after the quota is used up (it was counted).
    expect((await callF(B, { ...k, 'X-Request-Id': 'retry-me' })).status).toBe(200);
    // The key's owner reads its plan and usage; the operator sees every plan.
    const mine = (await (await fetch(url(B, '/usage'), { headers: k })).json()) as any;
    expect(mine).toMatchObject({ keyId: keyId(QUOTA_KEY), plan: { name: 'thirty-a-day' }, usage: { used: 30, limit: 30 } });
    const none = await fetch(url(B, '/usage'));
    expect(none.status).toBe(401);
    const all = (await admin(A, 'GET', '/admin/plans')).body.plans.map((p: any) => [p.plan.name, p.usage.used]);
    expect(all).toContainEqual(['thirty-a-day', 30]);
  }, 60_000);
});
