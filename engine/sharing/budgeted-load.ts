// A model load under the memory budget (ours): make room first (evicting idle
// models when the caller allows), hold the expected bytes, load and warm up,
// then charge what the load measured and refuse to stay over the budget.
// Making room and charging are exclusive (short); the loads themselves
// overlap, so a load that only needs free room never waits behind another
// one's worker start-up or warmup. A load that overlapped another cannot tell
// its RSS growth from the other's: it is charged its backend's figure (or its
// expected bytes), and the memory monitor charges the rest once it runs.
// From its measurement to its charge, what a load measured is in RSS but on
// no model's charge: the memory monitor counts it as the load's, not growth.
import fs from 'node:fs';
import path from 'node:path';
import type { ModelConfig } from '../api/model-config.ts';
import type { ModelVersion } from '../api/model-version.ts';
import type { EvictionCandidate } from './eviction-decision.ts';
import type { MemoryBudget } from './model-memory-budget.ts';
import { selfRssBytes, trimAllocator } from './process-memory.ts';
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
  /** RSS of the process (tests may replace it). */
  rss?: () => number;
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
  const instances = Math.max(
    1,
    (raw.instance_group ?? []).reduce((a, g) => a + Math.max(1, g.count ?? 1), 0),
  );
  return versions.reduce((a, v) => a + filesBytes(path.join(dir, String(v))), 0) * instances;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Evict until `need` more bytes fit, then run `then` in the same exclusive
 * turn; throws UNAVAILABLE when no room comes within ctx.waitMs. Between tries
 * the lock is free, so other loads and charges go on meanwhile.
 */
export async function makeRoom(
  budget: MemoryBudget,
  ctx: BudgetedLoadContext,
  need: number,
  then: () => void = () => {},
  what = `needs ${need} bytes`,
): Promise<void> {
  const until = performance.now() + ctx.waitMs;
  for (;;) {
    const done = await budget.exclusive(async () => {
      for (let round = 0; round < 8; round++) {
        const plan = budget.plan(need, ctx.evict ? ctx.candidates() : []);
        if (!plan.fits) return false;
        if (plan.evict.length === 0) {
          then();
          return true;
        }
        for (const victim of plan.evict) {
          if (await ctx.evict!(victim)) {
            budget.causedEviction(ctx.name);
            log.info(`memory budget: evicted '${victim}' to make room for '${ctx.name}'`);
          }
        }
        trimAllocator();
      }
      return false;
    });
    if (done) return;
    if (performance.now() >= until) {
      throw unavailable(
        `memory budget: model '${ctx.name}' ${what}; ${budget.usedBytes(ctx.name)} of ${budget.budgetBytes} are in use by models that cannot be evicted now`,
      );
    }
    await sleep(20);
  }
}

/** Loads whose RSS is being measured now; one that starts marks them all as overlapped. */
const measuring = new Set<{ overlapped: boolean }>();

/** Budgeted loads measuring their RSS growth now (the memory monitor waits for none). */
export const loadsMeasuring = (): number => measuring.size;

/** Load under the budget; `load` fills `loaded` (the caller unloads those if this throws). */
export async function budgetedLoad(budget: MemoryBudget, ctx: BudgetedLoadContext, load: () => Promise<ModelVersion[]>): Promise<void> {
  const t0 = process.hrtime.bigint();
  const previous = budget.costOf(ctx.name);
  const fileBytes = estimateBytes(ctx.dir, ctx.versions, ctx.raw);
  // A reload's old versions stay charged until they are replaced.
  // (Never more than the whole budget: a model that once grew past it may still load, and is evicted again if it grows.)
  const expected = Math.min(budget.expectedBytes(ctx.name, fileBytes), Math.max(fileBytes, budget.budgetBytes));
  const need = Math.max(0, expected - (previous?.bytes ?? 0));
  try {
    await makeRoom(budget, ctx, need, () => budget.reserve(ctx.name, need));
  } catch (err) {
    budget.loadFailed();
    throw err;
  }
  const tRoom = process.hrtime.bigint();
  const me = { overlapped: measuring.size > 0 };
  for (const m of measuring) m.overlapped = true;
  measuring.add(me);
  let loaded: ModelVersion[];
  let rssDelta: number;
  try {
    const rss = ctx.rss ?? selfRssBytes;
    const rss0 = rss();
    loaded = await load();
    rssDelta = Math.max(0, rss() - rss0);
  } catch (err) {
    budget.loadFailed(ctx.name);
    throw err;
  } finally {
    measuring.delete(me);
  }
  const tLoad = process.hrtime.bigint();
  const own = loaded.reduce((a, v) => a + (v.backend.memoryBytes?.() ?? 0), 0);
  const external = loaded.reduce((a, v) => a + (v.backend.externalMemoryBytes?.() ?? 0), 0);
  // Alone, the RSS growth across load and warmup is what the model holds (never less than the backend's own figure).
  const inProcess = me.overlapped ? Math.max(own, expected - external, 0) : Math.max(rssDelta, own);
  const bytes = inProcess + external;
  // Resident from here on, and told to the budget before any await: a memory monitor pass before the charge would
  // otherwise see it as growth of the models that ran meanwhile and charge it to them as well.
  budget.measuredLoad(ctx.name, inProcess);
  // The charge replaces the old versions' charge and the reservation; room for any more is made first, so the books never go over.
  const extra = Math.max(0, bytes - (previous?.bytes ?? 0) - need);
  const record = () => {
    budget.loaded(ctx.name, { bytes, rssDeltaBytes: me.overlapped ? 0 : rssDelta, externalBytes: external }, Number(tLoad - t0), !previous);
    const sum = (k: 'backendNs' | 'warmupNs') => loaded.reduce((a, v) => a + (v.loadTimings?.[k] ?? 0), 0);
    if (!previous) budget.notePhases(ctx.name, Number(tRoom - t0), sum('backendNs'), sum('warmupNs'));
  };
  try {
    await makeRoom(budget, ctx, extra, record, `needs ${bytes} bytes once loaded and warm`);
  } catch (err) {
    budget.loadFailed(ctx.name);
    throw err;
  }
  log.info(
    `memory budget: '${ctx.name}' loaded in ${ms(tLoad - t0)} ms (room ${ms(tRoom - t0)} ms, load and warmup ${ms(tLoad - tRoom)} ms${me.overlapped ? ', overlapped another load' : ''}); charged ${mib(bytes)} MiB`,
  );
}

const ms = (ns: bigint) => (Number(ns) / 1e6).toFixed(0);
const mib = (b: number) => (b / 2 ** 20).toFixed(1);
