// Usage plan admission: admitDecision() on a fake clock (the rule), and the
// Redis store's Lua copy of it run against a real redis-server on the same
// sequence of calls (a differential test: same admissions, same counts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admitDecision, quotaPeriod, keyId, type Plan, type PlanState } from '../../gateway/plans/usage-plan.ts';
import { MemoryPlanStore, RedisPlanStore } from '../../gateway/plans/plan-store.ts';
import { policyHeader } from '../../gateway/plans/plan-gate.ts';
import { TestRedis } from '../integration/L0_gateway-support.ts';

const plan: Plan = { name: 'p', rps: 10, burst: 5, quota: { period: 'day', limit: 8 } };

describe('admitDecision', () => {
  it('spends the burst, then refills at rps; a refusal spends nothing', () => {
    const s: PlanState = { used: 0 };
    const end = 1e12;
    const got = Array.from({ length: 7 }, () => admitDecision(s, { ...plan, quota: undefined }, 0, false, end).ok);
    expect(got).toEqual([true, true, true, true, true, false, false]);
    const no = admitDecision(s, { ...plan, quota: undefined }, 0, false, end);
    expect(no).toMatchObject({ ok: false, why: 'rate', retryAfterMs: 100 });
    expect(admitDecision(s, { ...plan, quota: undefined }, 100, false, end).ok).toBe(true);
    expect(s.used).toBe(6);
  });

  it('the quota refuses past its limit until the period ends; a duplicate id takes no quota', () => {
    const s: PlanState = { used: 0 };
    for (let i = 0; i < 8; i++) expect(admitDecision(s, plan, i * 1000, false, 86_400_000).ok).toBe(true);
    expect(admitDecision(s, plan, 9000, false, 86_400_000)).toMatchObject({ ok: false, why: 'quota', retryAfterMs: 86_391_000 });
    expect(admitDecision(s, plan, 9000, true, 86_400_000).ok).toBe(true);
    expect(s.used).toBe(8);
  });

  it('periods are UTC days and months', () => {
    const t = Date.UTC(2026, 11, 31, 23, 59);
    expect(quotaPeriod('day', t)).toEqual({ label: 'd20261231', endMs: Date.UTC(2027, 0, 1) });
    expect(quotaPeriod('month', t)).toEqual({ label: 'm202612', endMs: Date.UTC(2027, 0, 1) });
    expect(keyId('k')).toMatch(/^[0-9a-f]{16}$/);
    expect(policyHeader(plan)).toBe('10;w=1;burst=5, 8;w=86400');
  });
});

describe('the Redis script against admitDecision', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await TestRedis.start();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it('admits the same calls, with the same counts, for a burst, retries and the quota', async () => {
    const r = new RedisPlanStore(redis.url, { namespace: 'diff' });
    const m = new MemoryPlanStore(() => Date.now());
    const p: Plan = { name: 'p', rps: 0.001, burst: 12, quota: { period: 'month', limit: 9 } }; // no refill within the test
    const seq = Array.from({ length: 16 }, (_, i) => (i % 4 === 3 ? 'same-id' : i % 5 === 0 ? `id-${i}` : undefined));
    const rr = [];
    const mm = [];
    for (const id of seq) {
      rr.push(await r.admit('k1', p, id));
      mm.push(await m.admit('k1', p, id));
    }
    const shape = (a: { ok: boolean; used: number }) => [a.ok, a.used];
    expect(rr.map(shape)).toEqual(mm.map(shape));
    expect(rr.filter((a) => !a.ok).map((a) => (a as { why: string }).why)).toContain('quota');
    expect(await r.usage('k1', p)).toEqual(await m.usage('k1', p));
    await r.close();
  });

  it('calls arriving together (one script run) are admitted as one after the other', async () => {
    const r = new RedisPlanStore(redis.url, { namespace: 'batch' });
    const m = new MemoryPlanStore(() => Date.now());
    const p: Plan = { name: 'p', rps: 0.001, burst: 10, quota: { period: 'day', limit: 7 } };
    // Distinct ids: the script runs calls with ids after the id-less ones of their key, an order concurrent calls may take.
    const ids = Array.from({ length: 14 }, (_, i) => (i % 5 === 2 ? `id-${i}` : undefined));
    const together = await Promise.all(ids.map((id) => r.admit('k2', p, id)));
    const alone = [];
    for (const id of ids) alone.push(await m.admit('k2', p, id));
    const oks = (xs: Array<{ ok: boolean }>) => xs.filter((a) => a.ok).length;
    expect(oks(together)).toBe(oks(alone));
    const why = (xs: Array<{ ok: boolean; why?: string }>) =>
      xs
        .filter((a) => !a.ok)
        .map((a) => a.why)
        .sort();
    expect(why(together)).toEqual(why(alone));
    expect((await r.usage('k2', p)).used).toBe(7);
    const rate: Plan = { name: 'r', rps: 0.001, burst: 3 };
    const burst = await Promise.all(Array.from({ length: 5 }, () => r.admit('k3', rate, undefined)));
    expect(burst.map((a) => a.ok)).toEqual([true, true, true, false, false]);
    expect(burst[4]).toMatchObject({ ok: false, why: 'rate' });
    await r.close();
  });
});
