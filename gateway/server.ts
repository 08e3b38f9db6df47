// over 300 lines: past 300 only since the formatter wrapped its long lines (issue 38); to be split
// Assembles and runs one gateway: engine client, lease store (Redis when a
// URL is given, memory otherwise), function registry, staging arena, reaper,
// metrics and the Hono app on @hono/node-server. stop() is the graceful
// shutdown: refuse new calls, finish in-flight ones, unregister and unlink
// every region, release leases, close connections.
import os from 'node:os';
import type { AddressInfo } from 'node:net';
import { createServer } from 'node:http';
import { getRequestListener } from '@hono/node-server';
import { directCallListener } from './http/direct-call.ts';
import { directCallFront } from './http/direct-front.ts';
import { Http1Front } from '../net/http1/http1-front.ts';
import { CallAdmission, type AdmissionLimits } from './http/call-admission.ts';
import { listSharedMemoryKeys } from '../client/shared-memory.ts';
import { shmUnlinkIfExists } from '../native/index.ts';
import { createApp } from './app.ts';
import { GatewayTracing } from './core/otel.ts';
import { EngineClient } from './upstream/engine-client.ts';
import { FunctionRegistry, loadFunctionDirectory } from './calls/function-registry.ts';
import type { LeaseStore } from './staging/lease-store.ts';
import { MemoryLeaseStore } from './staging/memory-lease-store.ts';
import { GatewayMetrics } from './core/metrics.ts';
import { Reaper } from './staging/reaper.ts';
import { RedisLeaseStore } from './staging/redis-lease-store.ts';
import { newOwnerId, processAlive } from './staging/region-lease.ts';
import { StagingArena } from './staging/staging-arena.ts';
import type { FunctionDefinition } from './calls/function-schema.ts';
import { gatewayLog as log } from '../common/logger.ts';
import { JobRunner } from './jobs/job-runner.ts';
import { jobInvoker } from './jobs/job-call.ts';
import type { JobQueue } from './jobs/job-queue.ts';
import { MemoryJobQueue } from './jobs/memory-job-queue.ts';
import { RedisJobQueue } from './jobs/redis-job-queue.ts';
import { JobJournal } from './jobs/job-journal.ts';
import { jobDeliverer } from './jobs/job-deliverer.ts';
import { MemoryBundleStore, type BundleStore } from './deploy/bundle-store.ts';
import { RedisBundleStore } from './deploy/redis-bundle-store.ts';
import { GatewayPresence } from './upstream/gateway-presence.ts';
import { FunctionDeployer } from './deploy/function-deployer.ts';
import { engineTargetCheck } from './deploy/check-target.ts';
import { startDelivery, type Delivery } from './delivery/delivery-wiring.ts';
import { DEFAULT_HTTP_TIMEOUTS, handleClientErrors, timeoutServerOptions, type HttpTimeouts } from './http/http-timeouts.ts';
import { DEFAULT_GATEWAY_TRANSPORT, type GatewayTransport } from './core/transport-options.ts';

export interface GatewayOptions {
  port?: number;
  host?: string;
  /** Engine gRPC address host:port. */
  engine?: string;
  /** Transport choices (core/transport-options.ts: fronts, local channel, engine HTTP address), built once by main.ts; defaults where not given. */
  transport?: Partial<GatewayTransport>;
  /** Retry delay of a failed local channel (ms). */
  engineLocalRetryMs?: number;
  /** Folder of function definitions (*.json). */
  functions?: string;
  redisUrl?: string;
  /** Bodies above this many bytes are staged through shm. */
  shmThreshold?: number;
  /** The largest payload sent inline when shared memory is exhausted; above it such a call is refused (503 SHM_EXHAUSTED). Default: the engine's gRPC message limit less 1 MiB. */
  maxInlineBytes?: number;
  /** OTLP/HTTP traces endpoint for a span per /fn call (default: GATEWAY_OTLP_URL; none = off). */
  otlpTracesUrl?: string;
  leaseTtlMs?: number;
  /** false: never stage (a remote engine); true by default. */
  shm?: boolean;
  arenaRegions?: number;
  arenaRegionBytes?: number;
  /** shm key / region name prefix shared by the gateways of one host. */
  prefix?: string;
  /** Redis key namespace of the leases (default `tgw:<hostname>`). */
  leaseNamespace?: string;
  /** Time allowed for in-flight calls at shutdown (ms). */
  drainMs?: number;
  /** Async jobs run at once by this gateway. */
  jobsConcurrency?: number;
  /** A job held this long by a silent runner is claimed by another (ms). */
  jobClaimIdleMs?: number;
  /** Accepted jobs kept in memory to put back if Redis restarts empty (jobs/job-journal.ts; default 10,000; 0: no journal). */
  jobJournalMax?: number;
  /** Redis key namespace of jobs and deployed bundles, shared by all replicas (default `tgw`). */
  redisNamespace?: string;
  /** Serve the web console under /console (default true). */
  console?: boolean;
  /** The console's chart sampling interval (ms, default 2000). */
  consoleSampleMs?: number;
  /** A gateway silent this long is judged dead by the others (ms; default 3 × lease TTL). */
  presenceTtlMs?: number;
  /** Slow-client limits (http-timeouts.ts); each defaults to DEFAULT_HTTP_TIMEOUTS. */
  timeouts?: Partial<HttpTimeouts>;
  /** Rollout tick: counts pushed, store followed, gates judged (ms, default 200; delivery/). */
  rolloutTickMs?: number;
  /** How often usage plans are re-read from the store (ms, default 1000; plans/). */
  planPollMs?: number;
  /** Calls in flight per connection and per gateway (call-admission.ts); each defaults to DEFAULT_ADMISSION. */
  admission?: Partial<AdmissionLimits>;
}

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
  const leaseTtlMs = o.leaseTtlMs ?? 10_000;
  const prefix = o.prefix ?? 'tgw';
  const ownerId = newOwnerId();
  const definitions = loadFunctionDirectory(o.functions ?? 'functions');
  const transport = { ...DEFAULT_GATEWAY_TRANSPORT, ...o.transport };
  const engine = new EngineClient(o.engine ?? '127.0.0.1:8001', {
    localSocket: transport.engineLocalSocket,
    localRetryMs: o.engineLocalRetryMs,
    httpAddress: transport.engineHttp,
    grpcDirect: transport.engineGrpcDirect,
  });
  const redisUrl = o.redisUrl ?? process.env.REDIS_URL;
  const leaseNamespace = o.leaseNamespace ?? `tgw:${os.hostname()}`;
  const store = await openLeaseStore(redisUrl, leaseNamespace);
  const registry = new FunctionRegistry(engine, definitions);
  if (!(await engine.check())) log.warn(`engine at ${engine.address} is not ready yet; calls answer 503 until it is`);
  await registry.refreshEnsembles(true).catch(() => undefined); // engine not ready (warned above): the first call asks again
  for (const d of definitions) {
    await registry.resolve(d.name).catch((e) => log.warn(`function '${d.name}': ${(e as Error).message}`));
  }

  const { arena, reaper } = await startStaging(o, engine, store, { ownerId, prefix, leaseTtlMs });

  const admission = new CallAdmission(o.admission);
  const metrics = new GatewayMetrics(
    {
      admission,
      arena: arena ? () => arena.status() : undefined,
      engineUp: () => engine.up,
      localCalls: () => engine.localCalls,
      storeUp: () => store.state === 'up',
      reaped: () => reaper.reapedTotal,
    },
    true,
  );
  // Async jobs and deployed bundles: in Redis when configured (shared by replicas), else in this process only.
  const ns = o.redisNamespace ?? 'tgw';
  // Across hosts: heartbeat, and clean up after gateways that died without stopping (gateway-presence.ts).
  const presence = redisUrl
    ? new GatewayPresence(redisUrl, { namespace: ns, ownerId, leaseNamespace, ttlMs: o.presenceTtlMs ?? Math.max(3 * leaseTtlMs, 1000) })
    : undefined;
  await presence?.start();
  const jobs: JobQueue = redisUrl
    ? journaled(new RedisJobQueue(redisUrl, { namespace: ns }), redisUrl, ns, o.jobJournalMax)
    : new MemoryJobQueue();
  const bundles: BundleStore = redisUrl ? new RedisBundleStore(redisUrl, { namespace: ns }) : new MemoryBundleStore();
  const deployer = await startDeployer(o, bundles, registry, engine, definitions);
  const otlpUrl = o.otlpTracesUrl ?? process.env.GATEWAY_OTLP_URL;
  const tracing = otlpUrl ? new GatewayTracing(otlpUrl) : undefined;
  const delivery = await startDelivery({
    redisUrl,
    namespace: ns,
    owner: ownerId,
    registry,
    engine,
    deployer,
    tickMs: o.rolloutTickMs,
    planPollMs: o.planPollMs,
  });
  const invokeDeps = {
    registry,
    engine,
    arena,
    metrics,
    shmThreshold: o.shmThreshold ?? 65536,
    maxInlineBytes: o.maxInlineBytes,
    tracing,
    delivery: delivery.manager,
    plans: delivery.plans,
  };
  const runner = new JobRunner({
    queue: jobs,
    consumer: ownerId,
    invoke: jobInvoker(invokeDeps),
    deliver: jobDeliverer(),
    concurrency: o.jobsConcurrency ?? 4,
    claimIdleMs: o.jobClaimIdleMs ?? 30_000,
  });
  runner.start();
  const gw = createApp({
    ...invokeDeps,
    store,
    reaped: () => reaper.reapedTotal,
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

  const timeouts: HttpTimeouts = { ...DEFAULT_HTTP_TIMEOUTS, ...o.timeouts };
  const honoListener = getRequestListener(gw.app.fetch, { hostname: o.host ?? '0.0.0.0' });
  const directDeps = { ...invokeDeps, gate: gw.gate, jobs: true };
  const listener = admission.listener(!transport.directRoute ? honoListener : directCallListener(directDeps, honoListener));
  const server = createServer(timeoutServerOptions(timeouts), listener);
  const frontHandler = admission.front(directCallFront(directDeps));
  const front =
    !transport.directRoute || !transport.http1Front
      ? undefined
      : Http1Front.attach(server, frontHandler, { idleMs: timeouts.idleMs, headersMs: timeouts.headersMs });
  await new Promise<void>((resolve) => server.listen(o.port ?? 8080, o.host ?? '0.0.0.0', resolve));
  handleClientErrors(server, timeouts);
  const port = (server.address() as AddressInfo).port;
  log.info(`gateway ${ownerId} listening on :${port}, engine ${engine.address}, ${registry.names().length} functions`);

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      log.info('gateway shutting down: finishing in-flight calls');
      const closed = new Promise<void>((r) => server.close(() => r()));
      server.closeIdleConnections();
      front?.closeIdle();
      await gw.drain(o.drainMs ?? 10_000);
      gw.close();
      server.closeAllConnections();
      front?.closeAll();
      await closed;
      await runner.stop(o.drainMs ?? 10_000); // unfinished jobs stay pending (Redis) for another runner
      await jobs.close();
      await delivery.stop();
      await bundles.close();
      await presence?.stop();
      await reaper.stop();
      await arena?.stop();
      await store.close();
      engine.close();
      await tracing?.shutdown();
      log.info('gateway stopped: regions unregistered and unlinked, leases released');
    })());

  return { port, http1Front: front, admission, ownerId, arena, store, engine, registry, jobs, runner, deployer, presence, delivery, stop };
}

/** The Redis job queue behind a journal of the jobs this gateway accepted (unless max is 0). */
function journaled(q: RedisJobQueue, url: string, namespace: string, max = 10_000): JobQueue {
  return max > 0 ? new JobJournal(q, url, { namespace, maxEntries: max }) : q;
}

/** Leases in Redis when configured (shared by replicas; inline calls until it is reachable), else in this process. */
async function openLeaseStore(redisUrl: string | undefined, namespace: string): Promise<LeaseStore> {
  if (!redisUrl) return new MemoryLeaseStore();
  const rs = new RedisLeaseStore(redisUrl, { namespace });
  await rs.ready(3000).catch((e) => log.warn(`${(e as Error).message}; serving inline until it is reachable`));
  return rs;
}

/** The staging arena (unless shm is off) and the reaper of crashed owners' regions, both started. */
async function startStaging(
  o: GatewayOptions,
  engine: EngineClient,
  store: LeaseStore,
  who: { ownerId: string; prefix: string; leaseTtlMs: number },
): Promise<{ arena: StagingArena | undefined; reaper: Reaper }> {
  let arena: StagingArena | undefined;
  if (o.shm !== false) {
    arena = new StagingArena(engine, store, {
      ...who,
      regionCount: o.arenaRegions ?? 2,
      regionBytes: o.arenaRegionBytes ?? 32 * 1024 * 1024,
    });
    await arena.start();
  }
  const reaper = new Reaper(
    store,
    engine,
    { unlinkIfExists: shmUnlinkIfExists, listKeys: listSharedMemoryKeys, isProcessAlive: processAlive },
    who,
  );
  await reaper.start();
  return { arena, reaper };
}

/** The deployer, attached to its bundle store; while that store is down, the functions folder serves and attaching is retried. */
async function startDeployer(
  o: GatewayOptions,
  bundles: BundleStore,
  registry: FunctionRegistry,
  engine: EngineClient,
  definitions: FunctionDefinition[],
): Promise<FunctionDeployer> {
  const deployer = new FunctionDeployer({ store: bundles, registry, checkTarget: engineTargetCheck(engine) });
  try {
    const active = await deployer.start(definitions);
    log.info(`function bundle ${active.version} active (${active.functions.length} definitions, ${bundles.kind} store)`);
  } catch (e) {
    log.warn(`function bundle store unavailable (${(e as Error).message}); serving ${o.functions ?? 'functions'}/ until it is back`);
    void retrySync(deployer, definitions);
  }
  return deployer;
}

/** Keep trying to attach to the bundle store after a failed start (Redis down at boot). */
async function retrySync(deployer: FunctionDeployer, definitions: FunctionDefinition[]): Promise<void> {
  for (let delay = 500; !deployer.active; delay = Math.min(delay * 2, 10_000)) {
    await new Promise((r) => setTimeout(r, delay).unref());
    await deployer.start(definitions).catch(() => undefined); // still down (its first failure was logged): retried with backoff
  }
}
