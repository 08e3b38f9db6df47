// Where plans and their usage live. RedisPlanStore keeps them in Redis so
// every gateway enforces one budget and a restart loses nothing:
//   <ns>:plans                          hash key id -> plan JSON
//   <ns>:plan:bucket:<key id>           hash tokens, ts (expires once full again)
//   <ns>:plan:quota:<key id>:<period>   calls counted in the period (expires at its end)
//   <ns>:plan:seen:<key id>:<req id>    a counted request id, for a day (retries count once)
// One Lua script admits calls atomically with Redis's own clock (gateways'
// clocks may differ), several queued calls per run. MemoryPlanStore runs admitDecision() in process.
import { Redis } from 'ioredis';
import { admitDecision, quotaPeriod, type Admission, type Plan, type PlanState } from './usage-plan.ts';

// Admits a batch of calls in order, each as admitDecision() would one after
// the other. Entry i stands for n_i calls of one key (n > 1 only for calls
// without a request id): KEYS[3i+1..3i+3] = bucket, quota, seen;
// ARGV[6i+1..6i+6] = rps, burst, limit, hasId, periodEndMs, n. Per entry it
// returns {admitted, tokens, retryRateMs, retryQuotaMs, used, remaining}:
// the first `admitted` calls pass; a refused call spends nothing, so the rest
// all had a token (QUOTA_EXCEEDED) unless the whole tokens ran out
// (admitted = tokens: RATE_LIMITED, checked first as admitDecision does).
const ADMIT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for i = 0, #KEYS / 3 - 1 do
  local bucket, quota, seen = KEYS[3 * i + 1], KEYS[3 * i + 2], KEYS[3 * i + 3]
  local rps, burst, limit = tonumber(ARGV[6 * i + 1]), tonumber(ARGV[6 * i + 2]), tonumber(ARGV[6 * i + 3])
  local hasId, periodEnd, n = ARGV[6 * i + 4], tonumber(ARGV[6 * i + 5]), tonumber(ARGV[6 * i + 6])
  local b = redis.call('HMGET', bucket, 'tokens', 'ts')
  local tokens = tonumber(b[1]) or burst
  local ts = tonumber(b[2]) or now
  tokens = math.min(burst, tokens + math.max(0, now - ts) * rps / 1000)
  local used = tonumber(redis.call('GET', quota) or '0')
  local dup = hasId == '1' and redis.call('EXISTS', seen) == 1
  local withToken = math.max(0, math.floor(tokens))
  local k = math.min(n, withToken)
  if limit > 0 and not dup then k = math.max(0, math.min(k, limit - used)) end
  if k > 0 then
    tokens = tokens - k
    redis.call('HSET', bucket, 'tokens', string.format('%.6f', tokens), 'ts', now)
    redis.call('PEXPIRE', bucket, math.ceil(burst / rps * 1000) + 1000)
    if not dup then
      used = redis.call('INCRBY', quota, k)
      if used == k then redis.call('PEXPIREAT', quota, periodEnd + 3600000) end
      if hasId == '1' then redis.call('SET', seen, '1', 'PX', 86400000) end
    end
  end
  out[#out + 1] = k
  out[#out + 1] = withToken
  out[#out + 1] = math.ceil(math.max(0, 1 - tokens) * 1000 / rps)
  out[#out + 1] = periodEnd - now
  out[#out + 1] = used
  out[#out + 1] = math.floor(tokens)
end
return out`;

/** Calls admitted by one script run at most. */
const BATCH_MAX = 64;

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
  tgwPlanAdmit(...keysThenArgv: Array<string | number>): Promise<Array<number | string>>;
}

interface Pending {
  keys: string[];
  argv: Array<string | number>;
  /** Calls of one key without a request id share an entry. */
  group?: string;
  resolve(a: Admission): void;
  reject(e: unknown): void;
}

/** Resolve the calls of one entry from its script result (see ADMIT). */
function settle(calls: Pending[], r: number[]): void {
  const [admitted, tokens, retryRate, retryQuota, used, remaining] = r as [number, number, number, number, number, number];
  calls.forEach((c, j) => {
    if (j < admitted) c.resolve({ ok: true, used: used - (admitted - 1 - j), remaining: remaining + (admitted - 1 - j) });
    else if (admitted < tokens) c.resolve({ ok: false, why: 'quota', retryAfterMs: retryQuota, used });
    else c.resolve({ ok: false, why: 'rate', retryAfterMs: Math.max(1, retryRate), used });
  });
}

export class RedisPlanStore implements PlanStore {
  readonly kind = 'redis' as const;
  private readonly r: Redis & Scripts;
  private readonly ns: string;
  private queue: Pending[] = [];
  private flushing = false;

  constructor(url: string, o: { namespace?: string } = {}) {
    this.ns = o.namespace ?? 'tgw';
    this.r = new Redis(url, { maxRetriesPerRequest: 1 }) as Redis & Scripts;
    this.r.on('error', () => undefined); // commands fail with their own errors
    this.r.defineCommand('tgwPlanAdmit', { lua: ADMIT }); // numberOfKeys comes first in each call
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

  /**
   * Admit one call. Calls queued in the same turn of the event loop go to
   * Redis in one script run (in arrival order, each atomic as alone): a
   * loaded gateway pays one round trip's CPU for many calls, and nothing is
   * leased ahead, so no budget sits unused on a gateway.
   */
  admit(id: string, plan: Plan, requestId: string | undefined): Promise<Admission> {
    const p = periodOf(plan, Date.now());
    return new Promise((resolve, reject) => {
      this.queue.push({
        keys: [`${this.ns}:plan:bucket:${id}`, `${this.ns}:plan:quota:${id}:${p.label}`, `${this.ns}:plan:seen:${id}:${requestId ?? ''}`],
        argv: [plan.rps, plan.burst, plan.quota?.limit ?? 0, requestId === undefined ? '0' : '1', p.endMs],
        group: requestId === undefined ? `${id}:${p.label}:${plan.rps}:${plan.burst}:${plan.quota?.limit ?? 0}` : undefined,
        resolve,
        reject,
      });
      if (!this.flushing) {
        this.flushing = true;
        setImmediate(() => void this.flush());
      }
    });
  }

  private async flush(): Promise<void> {
    while (this.queue.length) {
      const batch = this.queue.splice(0, BATCH_MAX);
      // One entry per key for calls without an id (in arrival order within it), one per call with an id.
      const entries: Pending[][] = [];
      const byGroup = new Map<string, Pending[]>();
      for (const c of batch) {
        const g = c.group === undefined ? undefined : byGroup.get(c.group);
        if (g) g.push(c);
        else {
          const e = [c];
          entries.push(e);
          if (c.group !== undefined) byGroup.set(c.group, e);
        }
      }
      try {
        const out = (await this.r.tgwPlanAdmit(
          entries.length * 3,
          ...entries.flatMap((e) => e[0]!.keys),
          ...entries.flatMap((e) => [...e[0]!.argv, e.length]),
        )) as number[];
        entries.forEach((e, i) => settle(e, out.slice(6 * i, 6 * i + 6)));
      } catch (e) {
        for (const b of batch) b.reject(e);
      }
    }
    this.flushing = false;
  }

  async usage(id: string, plan: Plan): Promise<Usage> {
    const p = periodOf(plan, Date.now());
    return { period: p.label, used: Number((await this.r.get(`${this.ns}:plan:quota:${id}:${p.label}`)) ?? 0) };
  }

  async close() {
    await this.r.quit().catch(() => this.r.disconnect());
  }
}
