// The console's read-only view of progressive delivery and usage plans (under
// /console/api/*, so behind the console's own access check):
//   GET /console/api/rollouts  running rollouts and the last finished ones, with every step's numbers
//   GET /console/api/plans     every key's plan and its usage this period (keys by id only)
import type { Hono } from 'hono';
import type { GatewayEnv } from '../core/gateway-env.ts';
import type { UsagePlans } from '../plans/plan-gate.ts';
import type { RolloutStore } from './rollout-store.ts';

export interface DeliveryConsoleDeps {
  rollouts: RolloutStore;
  plans: UsagePlans;
}

export function mountDeliveryConsole(app: Hono<GatewayEnv>, d: DeliveryConsoleDeps): void {
  app.get('/console/api/rollouts', async (c) => {
    const [active, done] = await Promise.all([d.rollouts.active(), d.rollouts.done()]);
    return c.json({ active, done: done.slice(0, 10) });
  });
  app.get('/console/api/plans', async (c) => {
    const all = await d.plans.store.plans();
    const rows = await Promise.all([...all].map(async ([keyId, plan]) => ({ keyId, plan, usage: await d.plans.store.usage(keyId, plan) })));
    return c.json({ kind: d.plans.store.kind, plans: rows });
  });
}
