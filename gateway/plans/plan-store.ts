// Where plans and their usage live. RedisPlanStore keeps them in Redis so
// every gateway enforces one budget and a restart loses nothing:
//   <ns>:plans                          hash key id -> plan JSON
//   <ns>:plan:bucket:<key id>           hash tokens, ts (expires once full again)
//   <ns>:plan:quota:<key id>:<period>   calls counted in the period (expires at its end)
//   <ns>:plan:seen:<key id>:<req id>    a counted request id, for a day (retries count once)
// One Lua script admits a call atomically with Redis's own clock (gateways'
// clocks may differ). MemoryPlanStore runs admitDecision() in process.
import { Redis } from 'ioredis';
import { admitDecision, quotaPeriod, type Admission, type Plan, type PlanState } from './usage-plan.ts';

// KEYS = bucket, quota, seen; ARGV = rps, burst, limit, hasId, periodEndMs, nowMs (fallback).
// Mirrors admitDecision(). Returns {ok, why, retryAfterMs, used, remaining}.
const ADMIT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rps = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(b[1]) or burst
local ts = tonumber(b[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - ts) * rps / 1000)
local used = tonumber(redis.call('GET', KEYS[2]) or '0')
if tokens < 1 then return {0, 'rate', math.ceil((1 - tokens) * 1000 / rps), used, 0} end
local dup = ARGV[4] == '1' and redis.call('EXISTS', KEYS[3]) == 1
if limit > 0 and not dup and used >= limit then return {0, 'quota', tonumber(ARGV[5]) - now, used, 0} end
tokens = tokens - 1
redis.call('HSET', KEYS[1], 'tokens', string.format('%.6f', tokens), 'ts', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rps * 1000) + 1000)
if not dup then
  used = redis.call('INCR', KEYS[2])
  if used == 1 then redis.call('PEXPIREAT', KEYS[2], tonumber(ARGV[5]) + 3600000) end
  if ARGV[4] == '1' then redis.call('SET', KEYS[3], '1', 'PX', 86400000) end
end
return {1, 'ok', 0, used, math.floor(tokens)}`;

export interface Usage {
  period: string;
  used: number;
}

export interface PlanStore {
  readonly kind: 'memory' | 'redis';
  plans(): Promise<Map<string, Plan>>;
  setPlan(id: string, plan: Plan): Promise<void>;
  deletePlan(id: string): Promise<boolean>;
  admit(id: string, plan: Plan, requestId: string | undefined): Promise<Admission>;
  usage(id: string, plan: Plan): Promise<Usage>;
  close(): Promise<void>;
}

const periodOf = (plan: Plan, now: number) => quotaPeriod(plan.quota?.period ?? 'day', now);

export class MemoryPlanStore implements PlanStore {
  readonly kind = 'memory' as const;
  private readonly byId = new Map<string, Plan>();
  private readonly state = new Map<string, PlanState>();
  private readonly seen = new Map<string, number>();
  constructor(private readonly now: () => number = Date.now) {}
  async plans() {
    return new Map(this.byId);
  }
  async setPlan(id: string, plan: Plan) {
    this.byId.set(id, plan);
  }
  async deletePlan(id: string) {
    return this.byId.delete(id);
  }
  async admit(id: string, plan: Plan, requestId: string | undefined): Promise<Admission> {
    const now = this.now();
    const p = periodOf(plan, now);
    const k = `${id}:${p.label}`;
    const s = this.state.get(k) ?? { used: 0 };
    this.state.set(k, s);
    const sk = requestId === undefined ? undefined : `${id}:${requestId}`;
    const dup = sk !== undefined && (this.seen.get(sk) ?? 0) > now;
    const a = admitDecision(s, plan, now, dup, p.endMs);
    if (a.ok && !dup && sk !== undefined) {
      if (this.seen.size > 100_000) this.seen.clear(); // bounded: past this a retry may count twice
      this.seen.set(sk, now + 86_400_000);
    }
    return a;
  }
  async usage(id: string, plan: Plan): Promise<Usage> {
    const p = periodOf(plan, this.now());
    return { period: p.label, used: this.state.get(`${id}:${p.label}`)?.used ?? 0 };
  }
  async close() {}
}

interface Scripts {
  tgwPlanAdmit(bucket: string, quota: string, seen: string, ...argv: Array<string | number>): Promise<[number, string, number, number, number]>;
}

export class RedisPlanStore implements PlanStore {
  readonly kind = 'redis' as const;
  private readonly r: Redis & Scripts;
  private readonly ns: string;

  constructor(url: string, o: { namespace?: string } = {}) {
    this.ns = o.namespace ?? 'tgw';
    this.r = new Redis(url, { maxRetriesPerRequest: 1, enableAutoPipelining: true }) as Redis & Scripts;
    this.r.on('error', () => undefined); // commands fail with their own errors
    this.r.defineCommand('tgwPlanAdmit', { numberOfKeys: 3, lua: ADMIT });
  }

  async plans(): Promise<Map<string, Plan>> {
    const h = await this.r.hgetall(`${this.ns}:plans`);
    return new Map(Object.entries(h).map(([k, v]) => [k, JSON.parse(v) as Plan]));
  }

  async setPlan(id: string, plan: Plan) {
    await this.r.hset(`${this.ns}:plans`, id, JSON.stringify(plan));
  }

  async deletePlan(id: string) {
    return (await this.r.hdel(`${this.ns}:plans`, id)) > 0;
  }

  async admit(id: string, plan: Plan, requestId: string | undefined): Promise<Admission> {
    const p = periodOf(plan, Date.now());
    const seen = `${this.ns}:plan:seen:${id}:${requestId ?? ''}`;
    const [ok, why, retry, used, remaining] = await this.r.tgwPlanAdmit(
      `${this.ns}:plan:bucket:${id}`, `${this.ns}:plan:quota:${id}:${p.label}`, seen,
      plan.rps, plan.burst, plan.quota?.limit ?? 0, requestId === undefined ? '0' : '1', p.endMs,
    );
    return ok === 1 ? { ok: true, used, remaining } : { ok: false, why: why as 'rate' | 'quota', retryAfterMs: retry, used };
  }

  async usage(id: string, plan: Plan): Promise<Usage> {
    const p = periodOf(plan, Date.now());
    return { period: p.label, used: Number((await this.r.get(`${this.ns}:plan:quota:${id}:${p.label}`)) ?? 0) };
  }

  async close() {
    await this.r.quit().catch(() => this.r.disconnect());
  }
}
