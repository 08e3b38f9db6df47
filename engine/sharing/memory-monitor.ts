// Keeps the memory budget's books honest while models run (ours). A model's
// memory is not settled at load: ONNX Runtime grows its arenas with the
// batches it sees, Python stubs allocate as they like. Every interval this
// reads the engine's RSS and each Python stub's, and:
// - charges each Python model what its stubs hold now;
// - compares the engine's RSS above its empty baseline with what loaded
//   models are charged: growth beyond a small slack is charged to the models
//   that executed since the last pass (split evenly), a fall gives back the
//   growth charged before; what no model can take stays "unattributed" and
//   counts against the budget too (allocator retention after an unload);
// - when the books are over the budget, evicts idle models (least recently
//   used first) in on-demand mode, or warns.
// It skips a pass while a budgeted load measures its own RSS growth, and counts
// what a measured load holds until it is charged as that load's, not growth.
// ENGINE_TRACE=budget traces each pass's figures.
import type { ModelVersion } from '../api/model-version.ts';
import type { EvictionCandidate } from './eviction-decision.ts';
import type { MemoryBudget } from './model-memory-budget.ts';
import { loadsMeasuring } from './budgeted-load.ts';
import { selfRssBytes, trimAllocator } from './process-memory.ts';
import { log, tracer } from '../../common/logger.ts';

const trace = tracer('budget');
const mib = (b: number) => (b / 2 ** 20).toFixed(1);

export interface MemoryMonitorDeps {
  budget: MemoryBudget;
  /** Loaded versions of `name`. */
  versionsOf(name: string): ModelVersion[];
  candidates(): EvictionCandidate[];
  /** Unload an idle model; undefined outside on-demand mode (then over-budget only warns). */
  evict?: (name: string) => Promise<boolean>;
  intervalMs?: number;
  /** Growth below this is left unattributed (default 8 MiB). */
  slackBytes?: number;
  /** RSS of the process (tests may replace it). */
  rss?: () => number;
}

export class MemoryMonitor {
  private timer: NodeJS.Timeout | undefined;
  private readonly executions = new Map<string, number>();
  private warned = false;
  private readonly rss: () => number;
  /** Passes run (tests). */
  passes = 0;

  constructor(private readonly deps: MemoryMonitorDeps) {
    this.rss = deps.rss ?? selfRssBytes;
  }

  /** Take the empty engine's RSS as the baseline now (before any model loads) and start the passes. */
  start(): void {
    trimAllocator();
    this.deps.budget.baselineRssBytes = this.rss();
    const every = this.deps.intervalMs ?? 500;
    const loop = () => {
      this.timer = setTimeout(() => void this.pass().finally(() => this.timer !== undefined && loop()), every);
      this.timer.unref();
    };
    loop();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** One pass (exclusive with loads' room-making and charging). */
  pass(): Promise<void> {
    const { budget } = this.deps;
    return budget.exclusive(async () => {
      if (loadsMeasuring() > 0) return;
      this.passes++;
      const executed: string[] = [];
      for (const name of budget.loadedNames()) {
        const versions = this.deps.versionsOf(name);
        const external = versions.reduce((a, v) => a + (v.backend.externalMemoryBytes?.() ?? 0), 0);
        if (versions.some((v) => v.backend.externalMemoryBytes)) budget.setExternal(name, external);
        const n = versions.reduce((a, v) => a + v.stats.snapshot().execution_count, 0);
        if (n !== (this.executions.get(name) ?? 0)) executed.push(name);
        this.executions.set(name, n);
      }
      for (const name of this.executions.keys()) if (!budget.costOf(name)) this.executions.delete(name);
      this.settle(executed);
      if (budget.usedBytes() > budget.budgetBytes) await this.makeRoom();
    });
  }

  /** Match the books to the engine's RSS above its baseline. */
  private settle(executed: string[]): void {
    const { budget } = this.deps;
    const slack = this.deps.slackBytes ?? 8 * 2 ** 20;
    // Loads measured and not charged yet hold memory too: it is theirs, not growth of the models that ran.
    let inProcess = budget.measuredUnchargedBytes();
    for (const name of budget.loadedNames()) {
      const c = budget.costOf(name)!;
      inProcess += c.bytes - c.externalBytes;
    }
    let residual = this.rss() - budget.baselineRssBytes - inProcess;
    if (trace.enabled) {
      const charges = budget
        .loadedNames()
        .map((n) => `${n} ${mib(budget.bytesOf(n))}`)
        .join(', ');
      trace(
        `pass: RSS over baseline ${mib(residual + inProcess)} MiB, in-process books ${mib(inProcess)} MiB (${charges}), ran: ${executed.join(', ') || 'none'}`,
      );
    }
    if (residual > slack && executed.length) {
      for (const name of executed) budget.adjust(name, residual / executed.length);
      residual = 0;
    } else if (residual < -slack) {
      // Give back growth charged before (never below what a model was charged at load).
      const grown = budget.loadedNames().map((n) => [n, Math.max(0, budget.costOf(n)!.bytes - budget.costOf(n)!.loadBytes)] as const);
      const total = grown.reduce((a, [, g]) => a + g, 0);
      const back = Math.min(total, -residual);
      if (total > 0) for (const [n, g] of grown) budget.adjust(n, -(back * g) / total);
      residual += back;
    }
    budget.unattributedBytes = Math.max(0, residual);
  }

  private async makeRoom(): Promise<void> {
    const { budget, evict } = this.deps;
    const plan = budget.plan(0, evict ? this.deps.candidates() : []);
    if (!evict || !plan.fits || plan.evict.length === 0) {
      if (!this.warned)
        log.warn(`memory budget: models hold ${budget.usedBytes()} bytes of ${budget.budgetBytes} and none can be evicted now`);
      this.warned = true;
      return;
    }
    this.warned = false;
    for (const victim of plan.evict) {
      if (await evict(victim)) log.info(`memory budget: evicted '${victim}': the models grew over the budget while running`);
    }
    trimAllocator();
  }
}
