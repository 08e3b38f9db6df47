// A model load under the memory budget (ours): make room first (evicting idle
// models when the caller allows), load, charge what the load measured, and
// refuse to stay over the budget. Runs inside MemoryBudget.exclusive, so one
// budgeted load measures at a time.
import fs from 'node:fs';
import path from 'node:path';
import type { ModelConfig } from '../api/model-config.ts';
import type { ModelVersion } from '../repository/model-lifecycle.ts';
import type { EvictionCandidate } from './eviction-decision.ts';
import type { MemoryBudget } from './model-memory-budget.ts';
import { unavailable } from '../api/status.ts';
import { log } from '../../common/logger.ts';

export interface BudgetedLoadContext {
  name: string;
  /** The model folder and the versions about to load (for the estimate). */
  dir: string;
  versions: number[];
  raw: ModelConfig;
  /** Loaded models that could give way, the one being loaded excluded. */
  candidates(): EvictionCandidate[];
  /** Unload an idle model for room; false when it turned busy meanwhile. Undefined: never evict. */
  evict?: (name: string) => Promise<boolean>;
  /** How long to wait for a busy model to turn idle and evictable (0: fail at once). */
  waitMs: number;
}

/** Bytes a load will take before it is measured: the version folders' files once per instance. */
export function estimateBytes(dir: string, versions: number[], raw: ModelConfig): number {
  const filesBytes = (d: string): number => {
    if (!fs.existsSync(d)) return 0;
    let s = 0;
    for (const f of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, f.name);
      s += f.isDirectory() ? filesBytes(p) : fs.statSync(p).size;
    }
    return s;
  };
  const instances = Math.max(1, (raw.instance_group ?? []).reduce((a, g) => a + Math.max(1, g.count ?? 1), 0));
  return versions.reduce((a, v) => a + filesBytes(path.join(dir, String(v))), 0) * instances;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Evict until `need` more bytes fit; throws UNAVAILABLE when that cannot happen within ctx.waitMs. */
async function makeRoom(budget: MemoryBudget, ctx: BudgetedLoadContext, need: number): Promise<void> {
  const until = performance.now() + ctx.waitMs;
  for (;;) {
    const plan = budget.plan(need, ctx.evict ? ctx.candidates() : []);
    if (plan.fits && plan.evict.length === 0) return;
    if (plan.fits) {
      for (const victim of plan.evict) {
        if (await ctx.evict!(victim)) log.info(`memory budget: evicted '${victim}' to make room for '${ctx.name}'`);
      }
      continue;
    }
    if (performance.now() >= until) {
      throw unavailable(
        `memory budget: model '${ctx.name}' needs ${need} bytes; ${budget.usedBytes()} of ${budget.budgetBytes} are in use by models that cannot be evicted now`,
      );
    }
    await sleep(20);
  }
}

/** Load under the budget; `load` fills `loaded` (the caller unloads those if this throws). */
export function budgetedLoad(budget: MemoryBudget, ctx: BudgetedLoadContext, load: () => Promise<ModelVersion[]>): Promise<void> {
  return budget.exclusive(async () => {
    // A reload's old versions stay charged until they are replaced.
    const estimate = Math.max(0, estimateBytes(ctx.dir, ctx.versions, ctx.raw) - budget.bytesOf(ctx.name));
    try {
      await makeRoom(budget, ctx, estimate);
      const rss0 = process.memoryUsage().rss;
      const t0 = process.hrtime.bigint();
      const loaded = await load();
      const rssDeltaBytes = Math.max(0, process.memoryUsage().rss - rss0);
      const figures = loaded.map((v) => v.backend.memoryBytes?.());
      // The backend's own figure when it has one: a single load's RSS delta also holds worker start-up, GC timing and allocator retention.
      const bytes = figures.some((f) => f !== undefined) ? figures.reduce<number>((a, f) => a + (f ?? 0), 0) : rssDeltaBytes;
      const previous = budget.costOf(ctx.name);
      budget.loaded(ctx.name, { bytes, rssDeltaBytes }, Number(process.hrtime.bigint() - t0));
      if (budget.usedBytes() > budget.budgetBytes) {
        try {
          await makeRoom(budget, ctx, 0);
        } catch (err) {
          if (previous) budget.loaded(ctx.name, previous, 0);
          else budget.unloaded(ctx.name, false);
          throw err;
        }
      }
    } catch (err) {
      budget.loadFailed();
      throw err;
    }
  });
}
