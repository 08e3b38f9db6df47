// Progressive delivery on the real engine with two gateways sharing a real
// Redis: bad rollouts refused with nothing changed, the canary split measured
// across both gateways, sticky ids and pins, a slower canary rolled back by
// the p95 gate within its step (in-flight calls finishing), a healthy one
// promoted to a new bundle version, and a 1 s shadow that never reaches the
// client while its latency and difference are recorded.
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { setQuiet } from '../../common/logger.ts';
import { TestRedis, waitFor } from './L0_gateway-support.ts';
import { removeDir, startTestEngine } from './helpers.ts';
import { TOKEN, admin, callF, callSide, closeCallSockets, drive, functionDir, quantile, writeEchoModel } from './L0_delivery-support.ts';

// The environment this file stubs goes back after it (tests share a worker process: vitest.config.ts).
afterAll(() => vi.unstubAllEnvs());

let engine: Awaited<ReturnType<typeof startTestEngine>>;
let redis: TestRedis;
let repo: string;
let fnDir: string;
let A: RunningGateway;
let B: RunningGateway;

const GATES = { minCalls: 20, maxErrorRate: 0.05, maxP95Ratio: 2 };
/** Calls of the split test: 1,000 in npm test (the split is exact per gateway, so still within 1 point); ROLLOUT_SPLIT_CALLS=10000 runs the 10,000. */
const SPLIT_CALLS = Number(process.env.ROLLOUT_SPLIT_CALLS ?? 1000);
/** The shadow model's delay: far above any client latency, so a shadow on the client's path would show in its p99. */
const SHADOW_MS = 1000;

beforeAll(async () => {
  setQuiet(true);
  vi.stubEnv('GATEWAY_ADMIN_TOKEN', TOKEN);
  repo = fs.mkdtempSync('/tmp/gw-rollout-');
  writeEchoModel(repo, 'echo_a');
  writeEchoModel(repo, 'echo_b');
  writeEchoModel(repo, 'echo_slow', { delayMs: 40 });
  writeEchoModel(repo, 'echo_shadow', { delayMs: SHADOW_MS, add: 0.25, instances: 64 });
  writeEchoModel(repo, 'echo_int', { int: true });
  [engine, redis] = await Promise.all([startTestEngine({ modelRepository: repo, httpPort: -1, metricsPort: -1 }), TestRedis.start()]);
  fnDir = functionDir();
  const opts = {
    port: 0,
    host: '127.0.0.1',
    engine: `127.0.0.1:${engine.grpcPort}`,
    functions: fnDir,
    shm: false,
    redisUrl: redis.url,
    leaseNamespace: 'gwrollout',
    rolloutTickMs: 100,
    console: false,
  };
  A = await startGateway(opts);
  B = await startGateway(opts);
}, 120_000);

afterAll(async () => {
  closeCallSockets();
  try {
    await Promise.allSettled([A?.stop(), B?.stop()]);
  } finally {
    await redis?.stop();
    await engine?.stop();
  }
  removeDir(repo);
  removeDir(fnDir);
});

const target = async () =>
  (await admin(A, 'GET', '/admin/functions')).body.functions.find((f: any) => f.name === 'f').target.model as string;
const waitState = (id: string, state: string, ms = 20_000) =>
  waitFor(
    `rollout ${id} ${state}`,
    async () => {
      const r = (await admin(A, 'GET', `/admin/rollouts/${id}`)).body;
      return r.state === state ? r : undefined;
    },
    ms,
    50,
  );

describe('rollout refusals change nothing', () => {
  it.each([
    [
      'a share outside 0-100',
      { function: 'f', next: { target: { model: 'echo_b' } }, steps: [{ share: 150 }], gates: GATES },
      'share must be between 0 and 100',
    ],
    [
      'a canary target that does not exist',
      { function: 'f', next: { target: { model: 'nope' } }, steps: [{ share: 5 }], gates: GATES },
      "target model 'nope'",
    ],
    [
      'mismatched inputs and outputs',
      { function: 'f', next: { target: { model: 'echo_int' } }, steps: [{ share: 5 }], gates: GATES },
      "input 'x' is INPUT0:INT32",
    ],
    [
      'gates without a minimum call count',
      { function: 'f', next: { target: { model: 'echo_b' } }, steps: [{ share: 5 }], gates: { maxErrorRate: 0.1 } },
      'gates.minCalls',
    ],
    ['no gates at all', { function: 'f', next: { target: { model: 'echo_b' } }, steps: [{ share: 5 }] }, 'minimum call count'],
    [
      'an unknown function',
      { function: 'nope', next: { target: { model: 'echo_b' } }, steps: [{ share: 5 }], gates: GATES },
      "function 'nope' not found",
    ],
  ])('%s', async (_what, body, says) => {
    const r = await admin(A, 'POST', '/admin/rollouts', body);
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('ROLLOUT_INVALID');
    expect(r.body.error.errors.join('\n')).toContain(says);
    expect((await admin(B, 'GET', '/admin/rollouts')).body.active).toEqual([]);
    expect((await callF(A)).side).toBeNull();
  });

  it('a second rollout of the same function is refused (409) from either gateway', async () => {
    const body = {
      function: 'f',
      next: { target: { model: 'echo_b' } },
      steps: [{ share: 10, holdMs: 600_000 }, { share: 100 }],
      gates: { minCalls: 1_000_000 },
    };
    const first = await admin(A, 'POST', '/admin/rollouts', body);
    expect(first.status).toBe(201);
    const second = await admin(B, 'POST', '/admin/rollouts', body);
    expect([second.status, second.body.error.code]).toEqual([409, 'ROLLOUT_CONFLICT']);
    const ab = await admin(B, 'POST', `/admin/rollouts/${first.body.id}/abort`);
    expect(ab.body.state).toBe('aborted');
    expect((await admin(A, 'GET', '/admin/rollouts')).body.active).toEqual([]);
  });
});

describe('canary split across two gateways', () => {
  it(`${SPLIT_CALLS} calls over both gateways split within 1 point of the share; ids stick; pins win`, async () => {
    const r = await admin(A, 'POST', '/admin/rollouts', {
      function: 'f',
      next: { target: { model: 'echo_b' } },
      steps: [{ share: 20, holdMs: 600_000 }, { share: 100 }],
      gates: { minCalls: 1_000_000 },
    });
    expect(r.status).toBe(201);
    await waitFor('B follows the rollout', () => B.delivery.manager.following('f'), 5000);
    const sides = await drive(SPLIT_CALLS, 32, (i) => callSide(i % 2 ? A : B));
    const canary = sides.filter((s) => s === 'canary').length;
    expect(sides.every((s) => s === 'canary' || s === 'stable')).toBe(true);
    expect(Math.abs((100 * canary) / SPLIT_CALLS - 20)).toBeLessThanOrEqual(1);
    // Client ids: the same id gets the same side on both gateways and on a retry.
    const ids = Array.from({ length: 200 }, (_, i) => `req-${i}`);
    const first = await drive(ids.length, 16, (i) => callSide(A, { 'X-Request-Id': ids[i]! }));
    const again = await drive(ids.length, 16, (i) => callSide(B, { 'X-Request-Id': ids[i]! }));
    expect(again).toEqual(first);
    expect(first.filter((s) => s === 'canary').length).toBeGreaterThan(15);
    // A pin wins over the split, and the pinned side really answers (echo_b vs echo_a have the same math: check the header).
    for (const side of ['canary', 'stable']) expect((await callF(B, { 'X-Deploy-Side': side, 'X-Request-Id': 'req-1' })).side).toBe(side);
    await admin(A, 'POST', `/admin/rollouts/${r.body.id}/abort`);
  }, 300_000);
});

describe('gates', () => {
  it('a slower canary is rolled back by the p95 gate within its step; no call fails; the history says why', async () => {
    const r = await admin(A, 'POST', '/admin/rollouts', {
      function: 'f',
      next: { target: { model: 'echo_slow' } },
      steps: [{ share: 50, holdMs: 60_000 }, { share: 100 }],
      gates: GATES,
    });
    expect(r.status).toBe(201);
    await waitFor('B follows', () => B.delivery.manager.following('f'), 5000);
    const t0 = Date.now();
    let done = false;
    const results: Array<{ status: number; side: string | null }> = [];
    const watcher = waitState(r.body.id, 'rolled_back').finally(() => (done = true));
    await Promise.all(
      Array.from({ length: 8 }, async (_, w) => {
        while (!done) results.push(await callF(w % 2 ? A : B));
      }),
    );
    const rec = await watcher;
    expect(Date.now() - t0).toBeLessThan(60_000);
    expect(results.every((x) => x.status === 200)).toBe(true);
    expect(results.some((x) => x.side === 'canary')).toBe(true);
    const step = rec.steps[0];
    expect(step.decision).toBe('rolled_back');
    expect(step.reason).toMatch(/^p95 .* stable's/);
    expect(step.canary.calls).toBeGreaterThanOrEqual(GATES.minCalls);
    expect(step.canary.p95Ms).toBeGreaterThan(2 * step.stable.p95Ms);
    expect(await target()).toBe('echo_a');
    await waitFor('both gateways stop routing', async () => !A.delivery.manager.following('f') && !B.delivery.manager.following('f'), 5000);
    expect((await callF(B)).side).toBeNull();
  }, 90_000);

  it('a healthy canary is promoted step by step to 100 % and becomes the stable target', async () => {
    const r = await admin(A, 'POST', '/admin/rollouts', {
      function: 'f',
      next: { target: { model: 'echo_b' } },
      steps: [
        { share: 25, holdMs: 300 },
        { share: 100, holdMs: 300 },
      ],
      // The canary is the same model as the stable one; with about 20 calls a step on a loaded 2-core machine its
      // p95 came out at 2.03x the stable's (1 run in 8): the p95 gate at 2x is the slower-canary case's to show.
      gates: { ...GATES, maxP95Ratio: 4 },
    });
    expect(r.status).toBe(201);
    let done = false;
    const watcher = waitState(r.body.id, 'promoted', 40_000).finally(() => (done = true));
    const results: number[] = [];
    await Promise.all(
      Array.from({ length: 8 }, async (_, w) => {
        while (!done) results.push((await callF(w % 2 ? A : B)).status);
      }),
    );
    const rec = await watcher;
    expect(results.every((s) => s === 200)).toBe(true);
    expect(rec.steps.map((s: any) => [s.share, s.decision])).toEqual([
      [25, 'promoted'],
      [100, 'completed'],
    ]);
    expect(rec.steps[0].canary.calls).toBeGreaterThanOrEqual(GATES.minCalls);
    expect(await target()).toBe('echo_b');
    expect(rec.promotedVersion).toBe((await admin(B, 'GET', '/admin/functions')).body.version);
    const listed = (await admin(B, 'GET', '/admin/rollouts')).body.done.map((x: any) => [x.id, x.state]);
    expect(listed).toContainEqual([r.body.id, 'promoted']);
  }, 90_000);
});

describe('shadow traffic', () => {
  it('a shadow that sleeps 1 s does not move the client p99; its latency and difference are recorded', async () => {
    const base = await drive(200, 8, async (i) => callF(i % 2 ? A : B));
    const r = await admin(A, 'POST', '/admin/rollouts', { function: 'f', shadow: { target: { model: 'echo_shadow' }, share: 100 } });
    expect(r.status).toBe(201);
    await waitFor('B follows', () => B.delivery.manager.following('f'), 5000);
    const shadowed = await drive(200, 8, async (i) => callF(i % 2 ? A : B));
    expect(shadowed.every((x) => x.status === 200 && x.side === 'stable')).toBe(true);
    expect(shadowed[0]!.body.outputs.y.data).toEqual([1, 2, 3, 4]); // the stable answer, not the shadow's +0.25
    const p99 = quantile(
      shadowed.map((x) => x.ms),
      0.99,
    );
    const p99Base = quantile(
      base.map((x) => x.ms),
      0.99,
    );
    expect(p99).toBeLessThan(Math.max(3 * p99Base, p99Base + 100));
    const rec = await waitFor(
      'shadow numbers',
      async () => {
        const x = (await admin(A, 'GET', `/admin/rollouts/${r.body.id}`)).body;
        return x.shadow?.calls >= 50 ? x : undefined;
      },
      20_000,
      100,
    );
    expect(rec.shadow.p95Ms).toBeGreaterThanOrEqual(0.95 * SHADOW_MS);
    expect(rec.shadow.maxAbsDiff).toBeCloseTo(0.25, 5);
    expect(rec.shadow.mismatches).toBe(0);
    await admin(A, 'POST', `/admin/rollouts/${r.body.id}/abort`);
  }, 60_000);
});
