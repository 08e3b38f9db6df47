// Usage plan routes:
//   PUT    /admin/plans/:keyId   set a key's plan (admin token)
//   DELETE /admin/plans/:keyId   remove it
//   GET    /admin/plans          every plan with its usage this period
//   GET    /usage                the caller's own plan and usage (its API key)
// A key id is keyId(key): 16 hex digits of the key's SHA-256 (`npm run deploy -- key-id <key>` prints it).
import type { Hono } from 'hono';
import type { GatewayEnv } from '../core/gateway-env.ts';
import { gatewayError } from '../core/errors.ts';
import { presentedKey } from '../calls/api-key.ts';
import { describeIssues } from '../calls/function-schema.ts';
import { checkAdminToken } from '../deploy/admin-routes.ts';
import { PlanSchema, type Plan } from './usage-plan.ts';
import type { UsagePlans } from './plan-gate.ts';

export interface PlanRouteDeps {
  plans: UsagePlans;
}

const KEY_ID = /^[0-9a-f]{16}$/;

async function describe(d: PlanRouteDeps, id: string, plan: Plan) {
  const u = await d.plans.store.usage(id, plan).catch((e) => {
    throw gatewayError('PLANS_UNAVAILABLE', {}, e);
  });
  return { keyId: id, plan, usage: { period: u.period, used: u.used, limit: plan.quota?.limit ?? null } };
}

export function mountPlanRoutes(
  app: Hono<GatewayEnv>,
  d: PlanRouteDeps,
  adminToken: () => string | undefined = () => process.env.GATEWAY_ADMIN_TOKEN,
): void {
  app.use('/admin/plans', async (c, next) => {
    checkAdminToken(adminToken(), c.req.header('authorization'));
    await next();
  });
  app.use('/admin/plans/*', async (c, next) => {
    checkAdminToken(adminToken(), c.req.header('authorization'));
    await next();
  });

  app.put('/admin/plans/:keyId', async (c) => {
    const id = c.req.param('keyId');
    if (!KEY_ID.test(id)) throw gatewayError('PLAN_INVALID', { reason: `key id '${id}' is not 16 lowercase hex digits` });
    let raw: unknown;
    try {
      raw = await c.req.json();
    } catch (e) {
      throw gatewayError('BODY_INVALID', { reason: `not valid JSON: ${(e as Error).message}` });
    }
    const p = PlanSchema.safeParse(raw);
    if (!p.success) throw gatewayError('PLAN_INVALID', { reason: describeIssues(p.error).join('; ') });
    await d.plans.store.setPlan(id, p.data).catch((e) => {
      throw gatewayError('PLANS_UNAVAILABLE', {}, e);
    });
    await d.plans.refresh().catch(() => undefined); // saved in the store; the next plan poll reads it
    return c.json(await describe(d, id, p.data));
  });

  app.delete('/admin/plans/:keyId', async (c) => {
    const id = c.req.param('keyId');
    const gone = await d.plans.store.deletePlan(id);
    await d.plans.refresh().catch(() => undefined); // saved in the store; the next plan poll reads it
    return c.json({ keyId: id, deleted: gone });
  });

  app.get('/admin/plans', async (c) => {
    const all = await d.plans.store.plans();
    return c.json({ plans: await Promise.all([...all].map(([id, p]) => describe(d, id, p))) });
  });

  app.get('/usage', async (c) => {
    const key = presentedKey((h) => c.req.header(h));
    if (!key) throw gatewayError('PLAN_KEY_MISSING');
    const id = d.plans.idOf(key);
    const plan = d.plans.planOf(id);
    if (!plan) return c.json({ keyId: id, plan: null, usage: null });
    return c.json(await describe(d, id, plan));
  });
}
