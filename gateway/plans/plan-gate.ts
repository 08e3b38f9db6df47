// The plan check of one call: the key the call presents, its plan (followed
// from the store every second, so a plan set on one gateway applies on all),
// and one atomic admission in the store. A call without a key, or with a key
// that has no plan, passes untouched; with no plan at all the check costs a
// Map size test. Over the limit: 429 RATE_LIMITED or QUOTA_EXCEEDED with
// Retry-After and RateLimit-Limit / -Remaining / -Reset / -Policy.
//
// Ownership: owns the followed plans, the key -> id cache and the poll timer.
import { createHash } from 'node:crypto';
import { presentedKey } from '../calls/api-key.ts';
import { gatewayError, GatewayError } from '../core/errors.ts';
import { gatewayLog as log } from '../../common/logger.ts';
import type { PlanGate } from '../calls/call-route.ts';
import type { PlanStore } from './plan-store.ts';
import { keyId, type Plan } from './usage-plan.ts';

const KEY_CACHE_MAX = 1024;
const PERIOD_S = { day: 86_400, month: 2_592_000 };

/** The RateLimit-Policy header of a plan: its rate window and, with a quota, its quota window. */
export function policyHeader(p: Plan): string {
  const rate = `${p.rps};w=1;burst=${p.burst}`;
  return p.quota ? `${rate}, ${p.quota.limit};w=${PERIOD_S[p.quota.period]}` : rate;
}

export class UsagePlans implements PlanGate {
  private byId = new Map<string, Plan>();
  private readonly ids = new Map<string, string>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    readonly store: PlanStore,
    private readonly pollMs = 1000,
  ) {}

  async start(): Promise<void> {
    await this.refresh().catch((e) => log.warn(`usage plans: ${(e as Error).message}; no plan enforced until the store answers`));
    this.timer = setInterval(() => void this.refresh().catch(() => undefined), this.pollMs); // a failed poll keeps the plans last read
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  async refresh(): Promise<void> {
    this.byId = await this.store.plans();
  }

  /** The id of a key (cached: SHA-256 once per key). */
  idOf(key: string): string {
    let id = this.ids.get(key);
    if (id === undefined) {
      if (this.ids.size >= KEY_CACHE_MAX) this.ids.clear();
      this.ids.set(key, (id = keyId(key)));
    }
    return id;
  }

  planOf(id: string): Plan | undefined {
    return this.byId.get(id);
  }

  async admit(header: (name: string) => string | undefined, requestId: string | undefined): Promise<void> {
    if (this.byId.size === 0) return;
    const key = presentedKey(header);
    if (key === undefined) return;
    const id = this.idOf(key);
    const plan = this.byId.get(id);
    if (!plan) return;
    const rid = requestId !== undefined && requestId.length > 64 ? createHash('sha256').update(requestId).digest('hex') : requestId;
    let a;
    try {
      a = await this.store.admit(id, plan, rid);
    } catch (e) {
      throw gatewayError('PLANS_UNAVAILABLE', {}, e);
    }
    if (a.ok) return;
    const retryAfter = Math.max(1, Math.ceil(a.retryAfterMs / 1000));
    let err: GatewayError;
    if (a.why === 'rate') err = gatewayError('RATE_LIMITED', { plan: plan.name, rps: plan.rps, burst: plan.burst, retryAfter });
    else err = gatewayError('QUOTA_EXCEEDED', { plan: plan.name, period: plan.quota!.period, limit: plan.quota!.limit, retryAfter });
    err.headers = {
      'retry-after': String(retryAfter),
      'ratelimit-limit': String(a.why === 'rate' ? plan.rps : plan.quota!.limit),
      'ratelimit-remaining': '0',
      'ratelimit-reset': String(retryAfter),
      'ratelimit-policy': policyHeader(plan),
    };
    throw err;
  }
}
