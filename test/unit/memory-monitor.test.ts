// The memory monitor's passes over the budget's books, with the RSS it reads
// given by the test (the real RSS is checked by L0_budget_rss): growth after
// executions is charged to the models that ran, a fall gives it back, what no
// model can take stays unattributed and counts, over the budget evicts idle
// models, and a Python model is charged its stubs' RSS.
import { describe, expect, it } from 'vitest';
import { MemoryBudget } from '../../engine/sharing/model-memory-budget.ts';
import { MemoryMonitor } from '../../engine/sharing/memory-monitor.ts';
import type { ModelVersion } from '../../engine/api/model-version.ts';
import { rssBytesOf } from '../../engine/sharing/process-memory.ts';

const MiB = 2 ** 20;

function fakeVersion(execs: { n: number }, external?: () => number): ModelVersion {
  return {
    backend: { instances: [], finalize: async () => {}, ...(external ? { externalMemoryBytes: external } : {}) },
    stats: { snapshot: () => ({ execution_count: execs.n }) },
  } as unknown as ModelVersion;
}

function setup(budgetBytes: number) {
  const budget = new MemoryBudget(budgetBytes);
  let rss = 100 * MiB;
  const execs: Record<string, { n: number }> = { a: { n: 0 }, b: { n: 0 } };
  const evicted: string[] = [];
  let stubBytes = 0;
  const versions: Record<string, ModelVersion> = {
    a: fakeVersion(execs.a),
    b: fakeVersion(execs.b),
    py: fakeVersion({ n: 0 }, () => stubBytes),
  };
  const monitor = new MemoryMonitor({
    budget,
    rss: () => rss,
    versionsOf: (n) => (budget.costOf(n) ? [versions[n]!] : []),
    candidates: () =>
      budget.loadedNames().map((name) => ({ name, bytes: budget.bytesOf(name), lastUsedMs: 0, busy: name === 'a', pinned: false })),
    evict: async (n) => {
      evicted.push(n);
      budget.unloaded(n, true);
      return true;
    },
    slackBytes: 4 * MiB,
  });
  monitor.start();
  monitor.stop();
  return { budget, monitor, execs, evicted, setRss: (b: number) => (rss = b), setStub: (b: number) => (stubBytes = b) };
}

const cost = (bytes: number) => ({ bytes, rssDeltaBytes: bytes, externalBytes: 0 });

describe('MemoryMonitor', () => {
  it('charges growth after executions to the models that ran, gives it back when RSS falls, never below the load charge', async () => {
    const { budget, monitor, execs, setRss } = setup(1000 * MiB);
    expect(budget.baselineRssBytes).toBe(100 * MiB);
    budget.loaded('a', cost(50 * MiB), 1);
    budget.loaded('b', cost(50 * MiB), 1);
    setRss(260 * MiB); // 60 MiB more than the books, after a ran
    execs.a!.n = 3;
    await monitor.pass();
    expect(budget.bytesOf('a')).toBe(110 * MiB);
    expect(budget.bytesOf('b')).toBe(50 * MiB);
    expect(budget.costOf('a')!.loadBytes).toBe(50 * MiB);
    setRss(180 * MiB); // fell below the books: growth comes back first
    await monitor.pass();
    expect(budget.bytesOf('a')).toBe(50 * MiB);
    expect(budget.bytesOf('b')).toBe(50 * MiB);
  });

  it('keeps growth no model ran for as unattributed, and counts it against the budget', async () => {
    const { budget, monitor, setRss } = setup(1000 * MiB);
    budget.loaded('a', cost(50 * MiB), 1);
    setRss(190 * MiB);
    await monitor.pass();
    expect(budget.bytesOf('a')).toBe(50 * MiB);
    expect(budget.status().unattributedBytes).toBe(40 * MiB);
    expect(budget.usedBytes()).toBe(90 * MiB);
  });

  it('evicts idle models when growth puts the books over the budget, never the busy one', async () => {
    const { budget, monitor, execs, evicted, setRss } = setup(200 * MiB);
    budget.loaded('b', cost(80 * MiB), 1);
    budget.loaded('a', cost(80 * MiB), 1);
    execs.a!.n = 10;
    setRss(100 * MiB + 260 * MiB); // a grew by 100 MiB: 260 > 200
    await monitor.pass();
    expect(evicted).toEqual(['b']);
    expect(budget.loadedNames()).toEqual(['a']);
    expect(budget.status().models.find((m) => m.name === 'b')).toMatchObject({ resident: false, evicted: 1 });
  });

  it("charges a Python model its stubs' RSS as it changes", async () => {
    const { budget, monitor, setStub, setRss } = setup(1000 * MiB);
    budget.loaded('py', { bytes: 30 * MiB, rssDeltaBytes: 0, externalBytes: 30 * MiB }, 1);
    setRss(100 * MiB);
    setStub(500 * MiB);
    await monitor.pass();
    expect(budget.bytesOf('py')).toBe(500 * MiB);
    expect(budget.costOf('py')!.externalBytes).toBe(500 * MiB);
  });
});

describe('MemoryBudget books', () => {
  it('reserves for a load under way, expects a model its last steady charge, and counts cold loads and evictions per model', () => {
    const b = new MemoryBudget(1000);
    b.reserve('a', 300);
    expect(b.usedBytes()).toBe(300);
    b.loaded('a', { bytes: 200, rssDeltaBytes: 200, externalBytes: 0 }, 5e6);
    expect(b.usedBytes()).toBe(200);
    b.adjust('a', 150);
    b.causedEviction('c');
    b.unloaded('a', true);
    expect(b.expectedBytes('a', 10)).toBe(350);
    expect(b.expectedBytes('never-loaded', 10)).toBe(10);
    const st = b.status();
    expect(st.models.find((m) => m.name === 'a')).toMatchObject({ resident: false, coldLoads: 1, coldLoadNsTotal: 5e6, evicted: 1 });
    expect(st.models.find((m) => m.name === 'c')).toMatchObject({ evictionsCaused: 1 });
  });
});

describe('process memory', () => {
  it("reads a process's VmRSS from /proc, undefined for one that is gone", () => {
    expect(rssBytesOf('self')!).toBeGreaterThan(10 * MiB);
    expect(rssBytesOf(2 ** 22 + 12345)).toBeUndefined();
  });
});
