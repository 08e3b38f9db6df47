// A budgeted load beside the memory monitor, with the RSS both read given by
// the test: what a load measured is its own from the moment it is measured
// until it is charged, so a monitor pass in between does not take it for
// growth of the models that ran meanwhile. (L0_memory_budget hung on that
// under CPU contention: a pass charged a cold model's fresh load to the hot
// model, the books stood ~130 MB above the engine's RSS, and the load waited
// for room beside the never-idle hot model until its on-demand timeout.)
import { describe, expect, it } from 'vitest';
import type { ModelConfig } from '../../engine/api/model-config.ts';
import type { ModelVersion } from '../../engine/api/model-version.ts';
import { budgetedLoad, type BudgetedLoadContext } from '../../engine/sharing/budgeted-load.ts';
import { MemoryMonitor } from '../../engine/sharing/memory-monitor.ts';
import { MemoryBudget } from '../../engine/sharing/model-memory-budget.ts';

const MiB = 2 ** 20;

function fakeVersion(execs: { n: number }): ModelVersion {
  return {
    version: 1,
    backend: { instances: [], finalize: async () => {} },
    stats: { snapshot: () => ({ execution_count: execs.n }) },
  } as unknown as ModelVersion;
}

/** Pinned 'p' and hot 'a' (never idle) loaded, 100 MiB each; 'c' was charged 60 MiB when last loaded. */
function setup(budgetBytes: number) {
  const budget = new MemoryBudget(budgetBytes, ['p']);
  let rss = 100 * MiB;
  const execs: Record<string, { n: number }> = { p: { n: 0 }, a: { n: 0 }, c: { n: 0 } };
  const monitor = new MemoryMonitor({
    budget,
    rss: () => rss,
    versionsOf: (n) => (budget.costOf(n) ? [fakeVersion(execs[n]!)] : []),
    candidates: () =>
      budget.loadedNames().map((name) => ({ name, bytes: budget.bytesOf(name), lastUsedMs: 0, busy: name === 'a', pinned: name === 'p' })),
    evict: async () => false,
    slackBytes: 4 * MiB,
  });
  monitor.start();
  monitor.stop();
  const cost = (bytes: number) => ({ bytes, rssDeltaBytes: bytes, externalBytes: 0 });
  budget.loaded('c', cost(60 * MiB), 1);
  budget.unloaded('c', true);
  budget.loaded('p', cost(100 * MiB), 1);
  budget.loaded('a', cost(100 * MiB), 1);
  rss += 200 * MiB;
  const ctx: BudgetedLoadContext = {
    name: 'c',
    dir: '/nonexistent',
    versions: [1],
    raw: {} as ModelConfig,
    candidates: () =>
      budget
        .loadedNames()
        .filter((n) => n !== 'c')
        .map((name) => ({ name, bytes: budget.bytesOf(name), lastUsedMs: 0, busy: name === 'a', pinned: name === 'p' })),
    evict: async () => false,
    waitMs: 300,
    rss: () => rss,
  };
  return { budget, monitor, execs, ctx, grow: (b: number) => (rss += b), rssAboveBaseline: () => rss - budget.baselineRssBytes };
}

describe('budgetedLoad beside the memory monitor', () => {
  it("charges a load once: a monitor pass between its measurement and its charge leaves the hot model's charge alone", async () => {
    const { budget, monitor, execs, ctx, grow, rssAboveBaseline } = setup(300 * MiB);
    let pass: Promise<void> | undefined;
    await budgetedLoad(budget, ctx, async () => {
      grow(80 * MiB); // c measures 80 MiB (20 over its last charge: room for that is made after the load)
      execs.a!.n++; // the hot model ran meanwhile
      // A long exclusive section (another load's eviction) holds the lock; a monitor pass queues behind it and
      // runs once this load has measured, before its charge.
      let open!: () => void;
      void budget.exclusive(() => new Promise<void>((r) => (open = r)));
      pass = monitor.pass();
      setTimeout(() => open(), 0);
      return [fakeVersion(execs.c!)];
    });
    await pass;
    expect(monitor.passes).toBe(1);
    expect(budget.bytesOf('a')).toBe(100 * MiB);
    expect(budget.bytesOf('c')).toBe(80 * MiB);
    expect(budget.usedBytes()).toBe(rssAboveBaseline());
  });

  it("leaves what a load measured out of the growth while the load waits for room, and refuses it naming the others' bytes once the wait is over", async () => {
    const { budget, monitor, execs, ctx, grow } = setup(270 * MiB);
    const load = budgetedLoad(budget, ctx, async () => {
      grow(80 * MiB); // 280 MiB in all: over the budget, and the pinned and the hot model cannot give way
      return [fakeVersion(execs.c!)];
    });
    await new Promise((r) => setTimeout(r, 50));
    execs.a!.n++;
    await monitor.pass();
    expect(budget.bytesOf('a')).toBe(100 * MiB);
    expect(budget.status().unattributedBytes).toBe(0);
    expect(budget.usedBytes()).toBe(260 * MiB); // p, a and c's reservation (its estimate): nothing of c's 80 MiB twice
    await expect(load).rejects.toThrow(
      `memory budget: model 'c' needs ${80 * MiB} bytes once loaded and warm; ${200 * MiB} of ${270 * MiB} are in use`,
    );
    expect(budget.usedBytes()).toBe(200 * MiB);
  });
});
