// The console's JSON endpoints, polled by its client script:
//   GET /console/api/overview  engine health, staging (shm exhausted or not), every model (state, config digest, memory, cold loads and
//                              evictions from the engine's HTTP index, engine-loads.ts), every function
//   GET /console/api/series    chart points (rates and means per interval, see stats-series.ts)
//   GET /console/api/deploys   the active bundle and the activation history
//   GET /console/api/jobs      recent async jobs with status and callback attempts
// Read-only; admin actions (rollback) go to /admin/* with the admin token.
import type { Hono } from 'hono';
import type { GatewayEnv } from '../core/gateway-env.ts';
import type { ModelIndex } from '../../client/grpc-client.ts';
import type { FunctionDeployer } from '../deploy/function-deployer.ts';
import { describeFunction, type FunctionRegistry, type ResolvedFunction } from '../calls/function-registry.ts';
import type { JobQueue } from '../jobs/job-queue.ts';
import type { JobRecord } from '../jobs/job-state.ts';
import type { GatewayMetrics } from '../core/metrics.ts';
import type { ConsoleSampler } from './console-sampler.ts';
import type { ModelLoads } from '../upstream/engine-loads.ts';

/** What the console needs of the engine (EngineClient provides it). */
export interface ConsoleEngine {
  readonly address: string;
  readonly up: boolean;
  check(): Promise<boolean>;
  listModels(readyOnly?: boolean): Promise<ModelIndex[]>;
  modelConfig(name: string, version?: string): Promise<Record<string, unknown>>;
  modelStatistics(name?: string, version?: string): Promise<Array<Record<string, unknown>>>;
  modelLoads?(): Promise<ModelLoads[] | undefined>;
}

export interface ConsoleApiDeps {
  engine: ConsoleEngine;
  registry: Pick<FunctionRegistry, 'list' | 'version'>;
  metrics?: GatewayMetrics;
  jobs?: JobQueue;
  deployer?: FunctionDeployer;
  sampler: ConsoleSampler;
  /** The staging arena's state (absent: shm off); the overview shows it, shared memory exhaustion first. */
  staging?: () => { staging: boolean; reason?: string; shmExhausted: boolean; regions: number; bytesInUse: number; capacity: number };
}

// instance_group.kind as Triton numbers it, for decoders that keep enums numeric.
const KINDS = ['KIND_AUTO', 'KIND_GPU', 'KIND_CPU', 'KIND_MODEL'];
const kindName = (k: unknown) => (typeof k === 'number' ? (KINDS[k] ?? String(k)) : String(k ?? 'KIND_AUTO'));

/** The parts of a model config an operator looks at first. */
export function configDigest(cfg: Record<string, unknown> | undefined) {
  if (!cfg) return null;
  const groups = (cfg.instance_group ?? []) as Array<{ count?: number; kind?: string | number }>;
  const db = cfg.dynamic_batching as { preferred_batch_size?: number[]; max_queue_delay_microseconds?: string | number } | undefined;
  const steps = (cfg.ensemble_scheduling as { step?: Array<{ model_name: string }> } | undefined)?.step;
  return {
    platform: String(cfg.platform || cfg.backend || ''),
    maxBatchSize: Number(cfg.max_batch_size ?? 0),
    instances: groups.map((g) => ({ count: Number(g.count ?? 1), kind: kindName(g.kind) })),
    dynamicBatching: db
      ? { preferred: (db.preferred_batch_size ?? []).map(Number), maxQueueDelayUs: Number(db.max_queue_delay_microseconds ?? 0) }
      : null,
    ensembleSteps: steps?.map((s) => s.model_name) ?? null,
  };
}

/** A model's cold loads, last cold-load time and evictions; nulls when the engine did not say (no budget, no HTTP address, a plain Triton). */
function loadFigures(rows: ModelLoads[] | undefined, name: string, version: string) {
  const row = rows?.find((r) => r.name === name && (r.version === version || !r.version || !version));
  return { coldLoads: row?.coldLoads ?? null, lastColdLoadMs: row?.lastColdLoadMs ?? null, evictions: row?.evictions ?? null };
}

function memoryBytes(rows: Array<Record<string, unknown>>, name: string, version: string): number | null {
  const row = rows.find((r) => r.name === name && (r.version === version || !version));
  const usage = (row?.memory_usage ?? []) as Array<{ byte_size?: string | number }>;
  if (!usage.length) return null;
  return usage.reduce((s, u) => s + Number(u.byte_size ?? 0), 0);
}

/** A function as the overview and the try-it forms show it. */
export function functionRow(fn: ResolvedFunction) {
  const { limits: _limits, ...d } = describeFunction(fn);
  return {
    ...d,
    description: d.description ?? '',
    auth: fn.definition.auth ? { apiKeyEnv: fn.definition.auth.apiKeyEnv ?? [] } : null,
    async: !!fn.definition.async?.enabled,
  };
}

/** A callback URL without its query or fragment (they may carry the receiver's tokens). */
function callbackPlace(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}`;
  } catch {
    return '(invalid URL)';
  }
}

/** A job as the console lists it: id, function and states; no payload, no result, no key hash, no secrets. */
export function jobRow(r: JobRecord) {
  return {
    id: r.id,
    function: r.fn,
    status: r.state,
    createdAt: new Date(r.createdAt).toISOString(),
    updatedAt: new Date(r.updatedAt).toISOString(),
    httpStatus: r.status ?? null,
    runs: r.runs,
    callback: r.callback ? { url: callbackPlace(r.callback.url), attempts: r.attempts, maxAttempts: r.callback.maxAttempts } : null,
    lastError: r.lastError ?? null,
  };
}

export function mountConsoleApi(app: Hono<GatewayEnv>, d: ConsoleApiDeps): void {
  app.get('/console/api/overview', async (c) => {
    const ready = await d.engine.check();
    let models: unknown[] = [];
    let engineError: string | null = null;
    let loadsError: string | null = null;
    try {
      const [index, stats, loads] = await Promise.all([
        d.engine.listModels(false), // every model, so an evicted one shows with its figures
        d.engine.modelStatistics().catch(() => []), // without statistics the page still lists models (no memory figure)
        d.engine.modelLoads?.().catch((e: Error) => {
          loadsError = e.message;
          return undefined;
        }),
      ]);
      models = await Promise.all(
        index.map(async (m) => {
          const cfg = m.state === 'READY' ? await d.engine.modelConfig(m.name, m.version).catch(() => undefined) : undefined; // unloaded meanwhile: listed without its config
          return {
            name: m.name,
            version: m.version,
            state: m.state,
            reason: m.reason,
            config: configDigest(cfg),
            memoryBytes: memoryBytes(stats, m.name, m.version),
            ...loadFigures(loads, m.name, m.version),
          };
        }),
      );
    } catch (e) {
      engineError = (e as Error).message;
    }
    const { functions, unavailable } = await d.registry.list();
    return c.json({
      engine: { address: d.engine.address, up: d.engine.up, ready, error: engineError, loadsError },
      bundleVersion: d.registry.version,
      staging: d.staging ? d.staging() : null,
      models,
      functions: functions.map(functionRow),
      unavailable,
    });
  });

  app.get('/console/api/series', (c) => c.json({ intervalMs: d.sampler.intervalMs, keep: d.sampler.keep, points: d.sampler.look() }));

  app.get('/console/api/deploys', async (c) => {
    if (!d.deployer) return c.json({ enabled: false, active: null, history: [] });
    const active = d.deployer.active;
    const history = await d.deployer.history().catch(() => (active ? [active.version] : []));
    return c.json({
      enabled: true,
      active: active
        ? { version: active.version, functions: active.functions.map((f) => ({ name: f.name, model: f.target.model })) }
        : null,
      history: [...history].reverse(),
    });
  });

  app.get('/console/api/jobs', async (c) => {
    if (!d.jobs) return c.json({ kind: null, jobs: [] });
    const limit = Math.min(200, Math.max(1, Number(c.req.query('limit') ?? 50) || 50));
    return c.json({ kind: d.jobs.kind, jobs: (await d.jobs.recent(limit)).map(jobRow) });
  });
}
