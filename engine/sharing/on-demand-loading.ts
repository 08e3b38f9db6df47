// On-demand model control (ours, beyond Triton's none/poll/explicit): a
// request for a model that is in the repository but not loaded loads it and
// waits, bounded; under a memory budget the idle models give way. Here: the
// shared load per model with its timeout, and the eviction candidates as the
// budget's pure decision sees them.
import type { EvictionCandidate } from './eviction-decision.ts';
import type { ModelVersion } from '../api/model-version.ts';
import type { MemoryBudget } from './model-memory-budget.ts';
import { unavailable } from '../api/status.ts';
import type { InferRequest } from '../api/infer-request.ts';

/** What these helpers read of the repository manager. */
export interface OnDemandRepository {
  readonly loading: Set<string>;
  readonly pendingLoads: Map<string, Promise<void>>;
  entries(): Iterable<{ name: string; versions: Map<number, ModelVersion> }>;
  modelDirs(): string[];
  readyVersion(name: string, version?: number): ModelVersion | undefined;
  load(name: string): Promise<void>;
}

/** The request's ready model version, loading it first; the wait counts as its queue time. */
export async function readyOnDemand(
  repo: {
    readyVersion(name: string, version?: number): ModelVersion | undefined;
    ensureLoaded(name: string, timeoutMs: number): Promise<void>;
    get(name: string, version?: string): ModelVersion;
  },
  req: InferRequest,
  timeoutMs: number,
): Promise<ModelVersion> {
  const t0 = process.hrtime.bigint();
  const version = req.modelVersion ? Number(req.modelVersion) : undefined;
  // A call that says how long it may wait is never failed sooner for a load that is merely slow.
  const waitMs = Math.max(timeoutMs, (req.timeoutUs ?? 0) / 1000);
  // An eviction may win the race between a load finishing and this request using it: then load again.
  for (let attempt = 0; attempt < 3; attempt++) {
    const mv = repo.readyVersion(req.modelName, version);
    if (mv) {
      if (attempt > 0) mv.stats.queueWait(Number(process.hrtime.bigint() - t0));
      return mv;
    }
    await repo.ensureLoaded(req.modelName, waitMs);
  }
  return repo.get(req.modelName, req.modelVersion);
}

/** Load `name` unless it is ready or not in the repository; wait at most `timeoutMs`. */
export async function loadOnDemand(repo: OnDemandRepository, name: string, timeoutMs: number): Promise<void> {
  if (repo.readyVersion(name) || !repo.modelDirs().includes(name)) return;
  let p = repo.pendingLoads.get(name);
  if (!p) {
    p = repo.load(name).finally(() => repo.pendingLoads.delete(name));
    repo.pendingLoads.set(name, p);
  }
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(unavailable(`timed out after ${timeoutMs} ms waiting for model '${name}' to load on demand`)),
      timeoutMs,
    );
  });
  try {
    await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

const isEnsemble = (versions: Map<number, ModelVersion>) => [...versions.values()].some((v) => v.config.platform === 'ensemble');

/**
 * Every loaded plain model but `loadingName`, as an eviction candidate: busy
 * when requests are in progress or queued, when it is loading, or when an
 * ensemble in use has it as a step; pinned by flag or `parameters { key: "pinned" }`.
 */
export function evictionCandidates(repo: OnDemandRepository, budget: MemoryBudget, loadingName: string): EvictionCandidate[] {
  const neededByActive = new Set<string>();
  for (const e of repo.entries()) {
    if (!isEnsemble(e.versions)) continue;
    const active = budget.inUse(e.name) || [...e.versions.values()].some((v) => v.scheduler.inflightCount() > 0);
    if (!active) continue;
    for (const v of e.versions.values()) for (const s of v.config.ensemble_scheduling?.step ?? []) neededByActive.add(s.model_name);
  }
  const out: EvictionCandidate[] = [];
  for (const e of repo.entries()) {
    if (e.name === loadingName || e.versions.size === 0 || isEnsemble(e.versions)) continue;
    const versions = [...e.versions.values()];
    out.push({
      name: e.name,
      bytes: budget.bytesOf(e.name),
      lastUsedMs: 0, // the budget fills in its own record
      busy:
        budget.inUse(e.name) ||
        versions.some((v) => v.scheduler.inflightCount() > 0) ||
        repo.loading.has(e.name) ||
        neededByActive.has(e.name),
      pinned: budget.pinnedByFlag(e.name) || versions.some((v) => /^(true|1|yes)$/i.test(v.config.parameters?.pinned?.string_value ?? '')),
    });
  }
  return out;
}
