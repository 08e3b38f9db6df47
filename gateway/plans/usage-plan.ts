// Usage plans: what an API key may spend. A plan is a token bucket (rps
// refill, `burst` capacity) and an optional quota of calls per UTC day or
// month. Keys are named by their id (the first 16 hex digits of the key's
// SHA-256), so neither the store nor the console ever holds a key itself.
// admitDecision() is the one admission rule; the memory store runs it and the
// Redis store's Lua script is its copy (test/unit/usage-plans.test.ts runs
// both on the same sequences).
import { createHash } from 'node:crypto';
import { z } from 'zod';

export const PlanSchema = z
  .object({
    name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/),
    rps: z.number().positive().max(1e6).describe('calls per second, refilled continuously'),
    burst: z.number().int().min(1).max(1e7).describe('calls that may come at once (the bucket size)'),
    quota: z
      .object({ period: z.enum(['day', 'month']), limit: z.number().int().min(1) })
      .strict()
      .optional()
      .describe('calls per UTC day or month'),
  })
  .strict();
export type Plan = z.infer<typeof PlanSchema>;

/** The id a key is known by: 16 hex digits of its SHA-256. */
export function keyId(key: string): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 16);
}

/** The quota period a time falls in: its label (part of the counter's name) and when it ends (ms). */
export function quotaPeriod(period: 'day' | 'month', nowMs: number): { label: string; endMs: number } {
  const d = new Date(nowMs);
  const y = d.getUTCFullYear();
  const m = d.getUTCMonth();
  if (period === 'month') return { label: `m${y}${String(m + 1).padStart(2, '0')}`, endMs: Date.UTC(y, m + 1, 1) };
  return {
    label: `d${y}${String(m + 1).padStart(2, '0')}${String(d.getUTCDate()).padStart(2, '0')}`,
    endMs: Date.UTC(y, m, d.getUTCDate() + 1),
  };
}

/** A key's bucket and counter as stored. */
export interface PlanState {
  tokens?: number;
  ts?: number;
  used: number;
}

export type Admission =
  | { ok: true; used: number; remaining: number }
  | { ok: false; why: 'rate' | 'quota'; retryAfterMs: number; used: number };

/**
 * Admit one call or not, and how the state changes (in place). `dup`: the
 * request id was counted before (a retry): it takes a rate token but not
 * quota. Rate is checked first: a refused call spends nothing.
 */
export function admitDecision(s: PlanState, plan: Plan, now: number, dup: boolean, periodEndMs: number): Admission {
  let tokens = s.tokens ?? plan.burst;
  const ts = s.ts ?? now;
  tokens = Math.min(plan.burst, tokens + (Math.max(0, now - ts) * plan.rps) / 1000);
  if (tokens < 1) return { ok: false, why: 'rate', retryAfterMs: Math.ceil(((1 - tokens) * 1000) / plan.rps), used: s.used };
  const limit = plan.quota?.limit ?? 0;
  if (limit > 0 && !dup && s.used >= limit) return { ok: false, why: 'quota', retryAfterMs: periodEndMs - now, used: s.used };
  s.tokens = tokens - 1;
  s.ts = now;
  if (!dup) s.used++;
  return { ok: true, used: s.used, remaining: Math.floor(s.tokens) };
}
