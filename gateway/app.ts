// The gateway's Hono app: routes and the one onError that turns every thrown
// error into a catalog reply. Built from its dependencies, so tests drive it
// with app.request() and main.ts serves it with @hono/node-server.
//
// Ownership: the app owns the in-flight counter used by graceful shutdown;
// everything else is borrowed from AppDeps.
import { Hono, type Context } from 'hono';
import { HTTPException } from 'hono/http-exception';
import type { LeaseStore } from './staging/lease-store.ts';
import { gatewayError, GatewayError } from './core/errors.ts';
import { describeFunction } from './calls/function-registry.ts';
import { invoke, type InvokeDeps } from './calls/invoke.ts';
import { streamCalls, streamingFunctions } from './http/stream-routes.ts';
import { asyncCalls, mountJobRoutes, type AsyncDeps } from './jobs/async-routes.ts';
import { mountAdminRoutes } from './deploy/admin-routes.ts';
import type { FunctionDeployer } from './deploy/function-deployer.ts';
import { openApiDocument } from './http/openapi.ts';
import { mountConsole, type ConsoleDeps } from './console/console-routes.ts';
import { gatewayLog as log } from '../common/logger.ts';
import type { GatewayEnv } from './core/gateway-env.ts';
import type { CallGate } from './http/direct-call.ts';
import { mountRolloutRoutes, type RolloutRouteDeps } from './delivery/rollout-routes.ts';
import { mountPlanRoutes, type PlanRouteDeps } from './plans/plan-routes.ts';

export interface AppDeps extends InvokeDeps {
  store: LeaseStore;
  /** Regions cleaned by this gateway's reaper (for /readyz). */
  reaped?: () => number;
  /** Async jobs and inbound webhooks (gateway/jobs/); absent: synchronous calls only. */
  jobs?: AsyncDeps;
  /** Config deploys behind /admin (gateway/deploy/); absent: no admin routes. */
  deployer?: FunctionDeployer;
  /** The admin bearer token (default: GATEWAY_ADMIN_TOKEN at request time). */
  adminToken?: () => string | undefined;
  /** Rollout admin routes (gateway/delivery/); absent: none. */
  rollouts?: RolloutRouteDeps;
  /** Usage plan routes (gateway/plans/); absent: none. */
  planRoutes?: PlanRouteDeps;
  /** The web console under /console (gateway/console/); absent: no console. */
  console?: ConsoleDeps;
}

export interface GatewayApp {
  app: Hono<GatewayEnv>;
  /** Calls being served now. */
  inflight(): number;
  /** The in-flight accounting for calls served outside Hono (direct-call.ts). */
  gate: CallGate;
  /** Stop background work the app owns (the console's chart sampler). */
  close(): void;
  /** Refuse new calls (503 on /readyz) and resolve when in-flight calls are done or after timeoutMs. */
  drain(timeoutMs: number): Promise<void>;
}

/** The app's call accounting: calls in flight (Hono's and the direct route's), and a drain that waits for them. */
class CallCount {
  inflight = 0;
  draining = false;
  private drained: (() => void) | undefined;

  enter(): void {
    this.inflight++;
  }

  leave(): void {
    this.inflight--;
    if (this.draining && this.inflight === 0) this.drained?.();
  }

  /** Refuse new calls from now on; resolve when none is in flight, or after timeoutMs. */
  drain(timeoutMs: number): Promise<void> {
    this.draining = true;
    if (this.inflight === 0) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const t = setTimeout(resolve, timeoutMs);
      this.drained = () => {
        clearTimeout(t);
        resolve();
      };
    });
  }
}

/** The one onError: catalog errors as their JSON body, anything else as INTERNAL (detail to the log). */
function replyError(err: Error, c: Context<GatewayEnv>): Response {
  const transfer = c.get('transfer') ?? 'inline';
  c.header('X-Payload-Transfer', transfer);
  if (err instanceof GatewayError) {
    if (err.headers) for (const [k, v] of Object.entries(err.headers)) c.header(k, v);
    if (err.status >= 500)
      log.warn(`${c.req.method} ${c.req.path}: ${err.code}: ${err.message}${err.cause ? ` (${(err.cause as Error).message})` : ''}`);
    return c.json(err.toJSON(), err.status);
  }
  if (err instanceof HTTPException) return err.getResponse();
  log.error(`${c.req.method} ${c.req.path} failed`, err);
  return c.json(gatewayError('INTERNAL').toJSON(), 500);
}

/** /readyz's body and status: the engine, the lease store, staging, draining. */
async function readiness(deps: AppDeps, calls: CallCount): Promise<{ body: Record<string, unknown>; ready: boolean }> {
  const engineReady = await deps.engine.check();
  const staging = deps.arena?.status();
  const ready = engineReady && !calls.draining;
  const body = {
    ready,
    ...(calls.draining
      ? { reason: 'shutting down' }
      : !engineReady
        ? { reason: `engine at ${deps.engine.address} is not reachable or not ready` }
        : {}),
    engine: { address: deps.engine.address, up: deps.engine.up, ready: engineReady },
    leaseStore: { kind: deps.store.kind, state: deps.store.state },
    staging: staging
      ? {
          enabled: staging.staging,
          reason: staging.reason,
          shmExhausted: staging.shmExhausted,
          regions: staging.regions,
          leasesHeld: staging.leasesHeld,
          bytesInUse: staging.bytesInUse,
          capacity: staging.capacity,
        }
      : { enabled: false, reason: 'no staging arena (shm disabled)' },
    reaped: deps.reaped?.() ?? 0,
    inflight: calls.inflight,
  };
  return { body, ready };
}

/** Health, readiness, metrics, OpenAPI and the function list. */
function mountInfoRoutes(app: Hono<GatewayEnv>, deps: AppDeps, calls: CallCount): void {
  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.get('/readyz', async (c) => {
    const { body, ready } = await readiness(deps, calls);
    return c.json(body, ready ? 200 : 503);
  });
  app.get('/metrics', async (c) => {
    if (!deps.metrics) return c.text('', 200);
    return c.text(await deps.metrics.registry.metrics(), 200, { 'Content-Type': deps.metrics.registry.contentType });
  });
  app.get('/openapi.json', async (c) => {
    const { functions } = await deps.registry.list();
    return c.json(openApiDocument(functions, deps.registry.version, await streamingFunctions(deps, functions)));
  });
  app.get('/fn', async (c) => {
    const { functions, unavailable } = await deps.registry.list();
    return c.json({ version: deps.registry.version, functions: functions.map(describeFunction), unavailable });
  });
  app.get('/fn/:name', async (c) => c.json(describeFunction(await deps.registry.resolve(c.req.param('name')))));
}

/** POST /fn/<name>: counted, then async, streaming or plain calls, in that order. */
function mountCallRoutes(app: Hono<GatewayEnv>, deps: AppDeps, calls: CallCount): void {
  app.post('/fn/:name', async (c, next) => {
    if (calls.draining) throw gatewayError('GATEWAY_SHUTTING_DOWN');
    calls.enter();
    const t0 = performance.now();
    try {
      await next();
    } finally {
      const transfer = c.get('transfer') ?? 'inline';
      c.res.headers.set('X-Payload-Transfer', transfer);
      deps.metrics?.observe(c.get('fn') ?? '(unknown)', c.res.status, transfer, (performance.now() - t0) / 1000);
      calls.leave();
    }
  });
  if (deps.jobs) app.post('/fn/:name', asyncCalls(deps, deps.jobs));
  app.post('/fn/:name', streamCalls(deps)); // streaming functions (decoupled targets); others pass on
  app.post('/fn/:name', (c) => invoke(c, deps, c.req.param('name')));
}

export function createApp(deps: AppDeps): GatewayApp {
  const app = new Hono<GatewayEnv>();
  const calls = new CallCount();
  app.onError(replyError);
  app.notFound((c) => c.json(gatewayError('ROUTE_NOT_FOUND', { method: c.req.method, path: c.req.path }).toJSON(), 404));
  mountInfoRoutes(app, deps, calls);
  mountCallRoutes(app, deps, calls);
  if (deps.jobs) mountJobRoutes(app, deps.jobs, (name) => deps.registry.definitions().find((d) => d.name === name));
  if (deps.deployer) mountAdminRoutes(app, deps.deployer, deps.adminToken);
  if (deps.deployer && deps.rollouts) mountRolloutRoutes(app, deps.rollouts);
  if (deps.planRoutes) mountPlanRoutes(app, deps.planRoutes, deps.adminToken);
  const consoleUi = deps.console ? mountConsole(app, { adminToken: deps.adminToken, ...deps.console }) : undefined;
  const gate: CallGate = { open: () => !calls.draining, enter: () => calls.enter(), leave: () => calls.leave() };
  return {
    app,
    gate,
    inflight: () => calls.inflight,
    close: () => consoleUi?.stop(),
    drain: (timeoutMs) => calls.drain(timeoutMs),
  };
}
