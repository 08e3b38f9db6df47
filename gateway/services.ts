// The services one gateway runs behind its HTTP side: engine client, lease
// store (Redis when a URL is given, memory otherwise), function registry,
// staging arena and reaper, call admission, metrics, presence, job queue and
// runner, bundle store and deployer, rollouts and plans. startServices()
// starts them in dependency order; stopServices() stops them in reverse, once
// the HTTP side has drained (server.ts owns that order).
import os from 'node:os';
import { listSharedMemoryKeys } from '../client/shared-memory.ts';
import { shmUnlinkIfExists } from '../native/index.ts';
import { gatewayLog as log } from '../common/logger.ts';
import { CallAdmission } from './http/call-admission.ts';
import { JobRunner } from './jobs/job-runner.ts';
import { jobInvoker } from './jobs/job-call.ts';
import type { JobQueue } from './jobs/job-queue.ts';
import { MemoryJobQueue } from './jobs/memory-job-queue.ts';
import { RedisJobQueue } from './jobs/redis-job-queue.ts';
import { JobJournal } from './jobs/job-journal.ts';
import { jobDeliverer } from './jobs/job-deliverer.ts';
import { startDelivery, type Delivery } from './delivery/delivery-wiring.ts';
import { MemoryBundleStore, type BundleStore } from './deploy/bundle-store.ts';
import { RedisBundleStore } from './deploy/redis-bundle-store.ts';
import { FunctionDeployer } from './deploy/function-deployer.ts';
import { engineTargetCheck } from './deploy/check-target.ts';
import { FunctionRegistry, loadFunctionDirectory } from './calls/function-registry.ts';
import type { FunctionDefinition } from './calls/function-schema.ts';
import type { InvokeDeps } from './calls/invoke.ts';
import type { LeaseStore } from './staging/lease-store.ts';
import { MemoryLeaseStore } from './staging/memory-lease-store.ts';
import { RedisLeaseStore } from './staging/redis-lease-store.ts';
import { Reaper } from './staging/reaper.ts';
import { newOwnerId, processAlive } from './staging/region-lease.ts';
import { StagingArena } from './staging/staging-arena.ts';
import { EngineClient } from './upstream/engine-client.ts';
import { GatewayPresence } from './upstream/gateway-presence.ts';
import { GatewayMetrics } from './core/metrics.ts';
import { GatewayTracing } from './core/otel.ts';
import { DEFAULT_GATEWAY_TRANSPORT, type GatewayTransport } from './core/transport-options.ts';
import type { GatewayOptions } from './options.ts';

/** The started services; the HTTP side borrows them, stopServices() ends them. */
export interface GatewayServices {
  ownerId: string;
  transport: GatewayTransport;
  engine: EngineClient;
  store: LeaseStore;
  registry: FunctionRegistry;
  arena?: StagingArena;
  reaper: Reaper;
  admission: CallAdmission;
  metrics: GatewayMetrics;
  presence?: GatewayPresence;
  jobs: JobQueue;
  bundles: BundleStore;
  deployer: FunctionDeployer;
  tracing?: GatewayTracing;
  /** Rollouts and usage plans (delivery/, plans/). */
  delivery: Delivery;
  runner: JobRunner;
  /** What one call needs, shared by the app, the direct route and the job runner. */
  calls: InvokeDeps;
}

/** Start every service, each after those it needs. */
export async function startServices(o: GatewayOptions): Promise<GatewayServices> {
  const ownerId = newOwnerId();
  const leaseTtlMs = o.leaseTtlMs ?? 10_000;
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
  const registry = await openRegistry(engine, definitions);
  const { arena, reaper } = await startStaging(o, engine, store, { ownerId, prefix: o.prefix ?? 'tgw', leaseTtlMs });
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
  const ns = o.redisNamespace ?? 'tgw'; // jobs, bundles, presence, rollouts and plans: shared by all replicas
  const redis = redisUrl ? { url: redisUrl, namespace: ns } : undefined;
  const presenceTtlMs = o.presenceTtlMs ?? Math.max(3 * leaseTtlMs, 1000);
  const { presence, jobs, bundles } = await openShared(redis, { ownerId, leaseNamespace, ttlMs: presenceTtlMs }, o);
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
  const calls: InvokeDeps = {
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
  const runner = startRunner(o, jobs, ownerId, calls);
  return {
    ownerId,
    transport,
    engine,
    store,
    registry,
    arena,
    reaper,
    admission,
    metrics,
    presence,
    jobs,
    bundles,
    deployer,
    tracing,
    delivery,
    runner,
    calls,
  };
}

/** Stop the services, the job runner first, the engine client and tracing last; jobs get `drainMs` to finish (unfinished ones stay pending in Redis for another runner). */
export async function stopServices(s: GatewayServices, drainMs: number): Promise<void> {
  await s.runner.stop(drainMs);
  await s.jobs.close();
  await s.delivery.stop();
  await s.bundles.close();
  await s.presence?.stop();
  await s.reaper.stop();
  await s.arena?.stop();
  await s.store.close();
  s.engine.close();
  await s.tracing?.shutdown();
}

/** The registry of the folder's functions, each resolved against the engine if it is up (a call asks again if not). */
async function openRegistry(engine: EngineClient, definitions: FunctionDefinition[]): Promise<FunctionRegistry> {
  const registry = new FunctionRegistry(engine, definitions);
  if (!(await engine.check())) log.warn(`engine at ${engine.address} is not ready yet; calls answer 503 until it is`);
  await registry.refreshEnsembles(true).catch(() => undefined); // engine not ready (warned above): the first call asks again
  for (const d of definitions) {
    await registry.resolve(d.name).catch((e) => log.warn(`function '${d.name}': ${(e as Error).message}`));
  }
  return registry;
}

/**
 * What the gateways share, in Redis when configured, else in this process only: presence across hosts
 * (heartbeat, and clean-up after gateways that died without stopping: gateway-presence.ts), async jobs and
 * deployed bundles.
 */
async function openShared(
  redis: { url: string; namespace: string } | undefined,
  presence: { ownerId: string; leaseNamespace: string; ttlMs: number },
  {
    jobJournalMax,
    deployPollMs,
    jobRecordsMax,
    jobRecordsMaxBytes,
  }: Pick<GatewayOptions, 'jobJournalMax' | 'deployPollMs' | 'jobRecordsMax' | 'jobRecordsMaxBytes'>,
): Promise<{ presence: GatewayPresence | undefined; jobs: JobQueue; bundles: BundleStore }> {
  if (!redis) {
    const limits = {
      ...(jobRecordsMax ? { maxRecords: jobRecordsMax } : {}),
      ...(jobRecordsMaxBytes ? { maxBytes: jobRecordsMaxBytes } : {}),
    };
    return { presence: undefined, jobs: new MemoryJobQueue(Date.now, limits), bundles: new MemoryBundleStore() };
  }
  const { url, namespace } = redis;
  const heartbeat = new GatewayPresence(url, { namespace, ...presence });
  await heartbeat.start();
  return {
    presence: heartbeat,
    jobs: journaled(new RedisJobQueue(url, { namespace }), url, namespace, jobJournalMax),
    bundles: new RedisBundleStore(url, { namespace, pollMs: deployPollMs }),
  };
}

/** The Redis job queue behind a journal of the jobs this gateway accepted (unless max is 0). */
function journaled(q: RedisJobQueue, url: string, namespace: string, max = 10_000): JobQueue {
  return max > 0 ? new JobJournal(q, url, { namespace, maxEntries: max }) : q;
}

/** The runner of async jobs taken from `jobs`, started. */
function startRunner(o: GatewayOptions, jobs: JobQueue, ownerId: string, calls: InvokeDeps): JobRunner {
  const runner = new JobRunner({
    queue: jobs,
    consumer: ownerId,
    invoke: jobInvoker(calls),
    deliver: jobDeliverer(),
    concurrency: o.jobsConcurrency ?? 4,
    claimIdleMs: o.jobClaimIdleMs ?? 30_000,
  });
  runner.start();
  return runner;
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
