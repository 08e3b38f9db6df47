// The memory budget of the models loaded in this engine (ours; Triton has no
// budget). Owns the books: each model's resident bytes (measured at load),
// its last use, its requests in progress, pins, and the load/eviction
// counters. The repository manager asks it for room before a load and tells
// it what the load cost; one budgeted load at a time (exclusive), so the
// books and the RSS measurement of a load are not mixed with another's.
import { chooseEvictions, type EvictionCandidate } from './eviction-decision.ts';
import type { BudgetStatus, ModelCost } from '../api/sharing-status.ts';
import { SerialLock } from '../../common/serial-lock.ts';

// Importers keep reading the budget's report types from here.
export type { BudgetStatus, ModelCost } from '../api/sharing-status.ts';

export class MemoryBudget {
  private readonly cost = new Map<string, ModelCost>();
  private readonly lastUsed = new Map<string, number>();
  private readonly active = new Map<string, number>();
  private readonly pins: Set<string>;
  private readonly lock = new SerialLock();
  private readonly counts = { loads: 0, loadFailures: 0, evictions: 0, loadNsTotal: 0 };

  constructor(
    readonly budgetBytes: number,
    pinned: readonly string[] = [],
    private readonly nowMs: () => number = () => performance.now(),
  ) {
    this.pins = new Set(pinned);
  }

  /** Run `fn` with no other budgeted load or eviction at the same time. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    return this.lock.run(fn);
  }

  /** A request reached model `name` (or an ensemble): it is in use until end(). */
  begin(name: string): void {
    this.active.set(name, (this.active.get(name) ?? 0) + 1);
    this.lastUsed.set(name, this.nowMs());
  }

  end(name: string): void {
    const n = (this.active.get(name) ?? 1) - 1;
    if (n > 0) this.active.set(name, n);
    else this.active.delete(name);
  }

  inUse(name: string): boolean {
    return (this.active.get(name) ?? 0) > 0;
  }

  pinnedByFlag(name: string): boolean {
    return this.pins.has(name);
  }

  usedBytes(): number {
    let s = 0;
    for (const c of this.cost.values()) s += c.bytes;
    return s;
  }

  /** Bytes charged for `name` now (0 when not loaded). */
  bytesOf(name: string): number {
    return this.cost.get(name)?.bytes ?? 0;
  }

  costOf(name: string): ModelCost | undefined {
    return this.cost.get(name);
  }

  /** The models to unload so `needBytes` more fit; `fits` false when they cannot be made to. */
  plan(needBytes: number, candidates: readonly EvictionCandidate[]): ReturnType<typeof chooseEvictions> {
    return chooseEvictions(
      candidates.map((c) => ({ ...c, lastUsedMs: this.lastUsed.get(c.name) ?? 0 })),
      needBytes,
      this.usedBytes(),
      this.budgetBytes,
    );
  }

  loaded(name: string, cost: ModelCost, loadNs: number): void {
    this.cost.set(name, cost);
    this.lastUsed.set(name, this.nowMs());
    this.counts.loads++;
    this.counts.loadNsTotal += loadNs;
  }

  /** The model's charge grew or shrank (an instance added or removed). */
  adjust(name: string, deltaBytes: number): void {
    const c = this.cost.get(name);
    if (c) c.bytes = Math.max(0, c.bytes + deltaBytes);
  }

  loadFailed(): void {
    this.counts.loadFailures++;
  }

  /** `name` was unloaded; `evicted` when the budget chose it. */
  unloaded(name: string, evicted: boolean): void {
    this.cost.delete(name);
    if (evicted) this.counts.evictions++;
  }

  status(): BudgetStatus {
    return {
      budgetBytes: this.budgetBytes,
      usedBytes: this.usedBytes(),
      ...this.counts,
      models: [...this.cost.entries()].map(([name, c]) => ({ name, ...c })).sort((a, b) => (a.name < b.name ? -1 : 1)),
    };
  }
}
