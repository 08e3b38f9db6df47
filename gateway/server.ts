// Runs one gateway: its services (services.ts), the Hono app over them
// (app.ts), and the HTTP listeners in front (node:http, the direct route, the
// lean HTTP/1.1 front). stop() is the graceful shutdown: refuse new calls,
// finish in-flight ones, close connections, then stop the services
// (unregister and unlink every region, release leases).
import type { AddressInfo } from 'node:net';
import { createServer, type Server } from 'node:http';
import { getRequestListener } from '@hono/node-server';
import { directCallListener } from './http/direct-call.ts';
import { directCallFront } from './http/direct-front.ts';
import { Http1Front } from '../net/http1/http1-front.ts';
import type { CallAdmission } from './http/call-admission.ts';
import { createApp, type GatewayApp } from './app.ts';
import type { EngineClient } from './upstream/engine-client.ts';
import type { FunctionRegistry } from './calls/function-registry.ts';
import type { LeaseStore } from './staging/lease-store.ts';
import type { StagingArena } from './staging/staging-arena.ts';
import { gatewayLog as log } from '../common/logger.ts';
import type { JobRunner } from './jobs/job-runner.ts';
import type { JobQueue } from './jobs/job-queue.ts';
import type { GatewayPresence } from './upstream/gateway-presence.ts';
import type { FunctionDeployer } from './deploy/function-deployer.ts';
import type { Delivery } from './delivery/delivery-wiring.ts';
import { DEFAULT_HTTP_TIMEOUTS, handleClientErrors, timeoutServerOptions, type HttpTimeouts } from './http/http-timeouts.ts';
import { startServices, stopServices, type GatewayServices } from './services.ts';
import type { GatewayOptions } from './options.ts';

export interface RunningGateway {
  port: number;
  /** The lean HTTP/1.1 front, when on (its counters tell which requests it served). */
  http1Front?: Http1Front;
  /** In-flight counts and refusals of both fronts. */
  admission: CallAdmission;
  ownerId: string;
  arena?: StagingArena;
  store: LeaseStore;
  engine: EngineClient;
  registry: FunctionRegistry;
  jobs: JobQueue;
  runner: JobRunner;
  deployer: FunctionDeployer;
  presence?: GatewayPresence;
  /** Rollouts and usage plans (delivery/, plans/). */
  delivery: Delivery;
  stop(): Promise<void>;
}

export async function startGateway(o: GatewayOptions = {}): Promise<RunningGateway> {
  const s = await startServices(o);
  const gw = buildApp(o, s);
  const { server, front, port } = await listen(o, s, gw);
  log.info(`gateway ${s.ownerId} listening on :${port}, engine ${s.engine.address}, ${s.registry.names().length} functions`);
  let stopping: Promise<void> | undefined;
  const stop = () => (stopping ??= shutdown(o.drainMs ?? 10_000, s, gw, server, front));
  const { admission, ownerId, arena, store, engine, registry, jobs, runner, deployer, presence, delivery } = s;
  return { port, http1Front: front, admission, ownerId, arena, store, engine, registry, jobs, runner, deployer, presence, delivery, stop };
}

/** The Hono app over the services: calls, jobs, admin, rollouts, plans, and the console unless turned off. */
function buildApp(o: GatewayOptions, s: GatewayServices): GatewayApp {
  const { engine, registry, metrics, jobs, deployer, arena, delivery } = s;
  return createApp({
    ...s.calls,
    store: s.store,
    reaped: () => s.reaper.reapedTotal,
    jobs: { queue: jobs },
    deployer,
    rollouts: delivery.routes,
    planRoutes: { plans: delivery.plans },
    ...(o.console === false
      ? {}
      : {
          console: {
            engine,
            registry,
            metrics,
            jobs,
            deployer,
            sampleMs: o.consoleSampleMs,
            staging: arena ? () => arena.status() : undefined,
            delivery: { rollouts: delivery.store, plans: delivery.plans },
          },
        }),
  });
}

/**
 * The node:http server (the direct route ahead of Hono when on) and the lean HTTP/1.1 front on
 * its connections (when on), both behind call admission, listening.
 */
async function listen(
  o: GatewayOptions,
  s: GatewayServices,
  gw: GatewayApp,
): Promise<{ server: Server; front: Http1Front | undefined; port: number }> {
  const { admission, transport } = s;
  const timeouts: HttpTimeouts = { ...DEFAULT_HTTP_TIMEOUTS, ...o.timeouts };
  const honoListener = getRequestListener(gw.app.fetch, { hostname: o.host ?? '0.0.0.0' });
  const directDeps = { ...s.calls, gate: gw.gate, jobs: true };
  const listener = admission.listener(!transport.directRoute ? honoListener : directCallListener(directDeps, honoListener));
  const server = createServer(timeoutServerOptions(timeouts), listener);
  const frontHandler = admission.front(directCallFront(directDeps));
  const front =
    !transport.directRoute || !transport.http1Front
      ? undefined
      : Http1Front.attach(server, frontHandler, { idleMs: timeouts.idleMs, headersMs: timeouts.headersMs });
  await new Promise<void>((resolve) => server.listen(o.port ?? 8080, o.host ?? '0.0.0.0', resolve));
  handleClientErrors(server, timeouts);
  return { server, front, port: (server.address() as AddressInfo).port };
}

/** Refuse new connections, give in-flight calls `drainMs`, close every connection, then stop the services. */
async function shutdown(drainMs: number, s: GatewayServices, gw: GatewayApp, server: Server, front: Http1Front | undefined): Promise<void> {
  log.info('gateway shutting down: finishing in-flight calls');
  const closed = new Promise<void>((r) => server.close(() => r()));
  server.closeIdleConnections();
  front?.closeIdle();
  await gw.drain(drainMs);
  gw.close();
  server.closeAllConnections();
  front?.closeAll();
  await closed;
  await stopServices(s, drainMs);
  log.info('gateway stopped: regions unregistered and unlinked, leases released');
}
