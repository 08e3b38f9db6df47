// Admin routes of progressive delivery (behind the admin token, as every
// /admin route):
//   POST /admin/rollouts            start a rollout (400 lists every problem, 409 when one runs)
//   GET  /admin/rollouts            running and finished rollouts
//   GET  /admin/rollouts/:id        one rollout: each step, its numbers, the decision
//   POST /admin/rollouts/:id/abort  end it by hand; calls go back to stable
import type { Hono } from 'hono';
import { randomUUID } from 'node:crypto';
import type { GatewayEnv } from '../core/gateway-env.ts';
import { gatewayError } from '../core/errors.ts';
import type { MetadataSource, ResolvedFunction } from '../calls/function-registry.ts';
import { checkRollout } from './rollout-check.ts';
import type { RolloutRecord } from './rollout-spec.ts';
import type { RolloutStore } from './rollout-store.ts';
import type { RolloutManager } from './rollout-manager.ts';
import { zero } from './rollout-manager.ts';

export interface RolloutRouteDeps {
  store: RolloutStore;
  manager: RolloutManager;
  resolve(name: string): Promise<ResolvedFunction>;
  engine: Pick<MetadataSource, 'modelMetadata'>;
  bundleVersion(): string;
}

/** Check, then store a new running rollout; throws ROLLOUT_INVALID (with every problem) or ROLLOUT_CONFLICT. */
export async function startRollout(d: RolloutRouteDeps, raw: unknown): Promise<RolloutRecord> {
  const { request, errors } = await checkRollout(raw, d.resolve, d.engine);
  if (!request) throw Object.assign(gatewayError('ROLLOUT_INVALID', { count: errors.length }), { details: errors });
  const now = Date.now();
  const rec: RolloutRecord = {
    id: `ro-${randomUUID().slice(0, 8)}`,
    function: request.function,
    baseVersion: d.bundleVersion(),
    spec: request,
    state: 'running',
    step: 0,
    createdAt: now,
    updatedAt: now,
    steps: request.steps ? [{ share: request.steps[0]!.share, startedAt: now, stable: zero(), canary: zero() }] : [],
  };
  let created: boolean;
  try {
    created = await d.store.create(rec);
  } catch (e) {
    throw gatewayError('DEPLOY_UNAVAILABLE', {}, e);
  }
  if (!created) throw gatewayError('ROLLOUT_CONFLICT', { name: request.function });
  await d.manager.follow().catch(() => undefined); // this gateway routes at once; others within a tick
  return rec;
}

export function mountRolloutRoutes(app: Hono<GatewayEnv>, d: RolloutRouteDeps): void {
  app.post('/admin/rollouts', async (c) => {
    let raw: unknown;
    try {
      raw = await c.req.json();
    } catch (e) {
      throw gatewayError('BODY_INVALID', { reason: `not valid JSON: ${(e as Error).message}` });
    }
    return c.json(await startRollout(d, raw), 201);
  });

  app.get('/admin/rollouts', async (c) => c.json({ active: await d.store.active(), done: await d.store.done() }));

  app.get('/admin/rollouts/:id', async (c) => {
    const r = await d.store.byId(c.req.param('id'));
    if (!r) throw gatewayError('ROLLOUT_NOT_FOUND', { id: c.req.param('id') });
    return c.json(r);
  });

  app.post('/admin/rollouts/:id/abort', async (c) => {
    const r = await d.store.byId(c.req.param('id'));
    if (!r) throw gatewayError('ROLLOUT_NOT_FOUND', { id: c.req.param('id') });
    if (r.state !== 'running') throw gatewayError('ROLLOUT_FINISHED', { id: r.id, state: r.state });
    const now = Date.now();
    const step = r.steps[r.step];
    if (step) Object.assign(step, { endedAt: now, decision: 'aborted', reason: 'aborted by the operator' });
    r.state = 'aborted';
    r.updatedAt = now;
    await d.store.save(r);
    await d.manager.follow().catch(() => undefined); // the next rollout tick follows the store again
    return c.json(r);
  });
}
