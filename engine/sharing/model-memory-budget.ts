// The memory budget of the models loaded in this engine (ours; Triton has no
// budget). Owns the books: each model's charge (measured at load, warm, and
// grown by what the memory monitor sees it take while it runs), bytes no
// model could be charged with yet, its last use, its requests in progress,
// pins, and the counters (per model: cold loads and their time, evictions it
// caused). The repository manager asks it for room before a load and tells
// it what the load cost. Making room and charging run one at a time
// (exclusive); the loads themselves may overlap.
import { chooseEvictions, type EvictionCandidate } from './eviction-decision.ts';
import type { BudgetStatus, ModelCost, ModelLoadStats } from '../api/sharing-status.ts';
import { SerialLock } from '../../common/serial-lock.ts';

// Importers keep reading the budget's report types from here.
export type { BudgetStatus, ModelCost, ModelLoadStats } from '../api/sharing-status.ts';

const noStats = (): ModelLoadStats => ({
  coldLoads: 0,
  coldLoadNsTotal: 0,
  lastColdLoadNs: 0,
  evictionsCaused: 0,
  evicted: 0,
  coldRoomNsTotal: 0,
  coldBackendNsTotal: 0,
  coldWarmupNsTotal: 0,
});

export class MemoryBudget {
  private readonly cost = new Map<string, ModelCost>();
  private readonly history = new Map<string, ModelLoadStats>();
  /** The last steady charge of a model no longer loaded: the estimate for its next load. */
  private readonly lastBytes = new Map<string, number>();
  /** Bytes held for loads under way (their estimate), by model. */
  private readonly reserved = new Map<string, number>();
  /** In-process bytes of loads that measured and are not charged yet: resident already, by model. */
  private readonly measured = new Map<string, number>();
  private readonly lastUsed = new Map<string, number>();
  private readonly active = new Map<string, number>();
  private readonly pins: Set<string>;
  private readonly lock = new SerialLock();
  private readonly counts = { loads: 0, loadFailures: 0, evictions: 0, loadNsTotal: 0 };
  /** Set by the memory monitor. */
  unattributedBytes = 0;
  baselineRssBytes = 0;

  constructor(
    readonly budgetBytes: number,
    pinned: readonly string[] = [],
    private readonly nowMs: () => number = () => performance.now(),
  ) {
    this.pins = new Set(pinned);
  }

  /** Run `fn` with no other room-making, charging or monitor pass at the same time. */
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

  /** Charged to loaded models, held for loads under way (but `loading`'s), and not attributable to any model. */
  usedBytes(loading?: string): number {
    let s = this.unattributedBytes;
    for (const c of this.cost.values()) s += c.bytes;
    for (const [name, r] of this.reserved) if (name !== loading) s += r;
    return s;
  }

  /** Charged to loaded models only. */
  chargedBytes(): number {
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

  loadedNames(): string[] {
    return [...this.cost.keys()];
  }

  /** What a load of `name` will take: its last steady charge when it was loaded before, else `fallback`. */
  expectedBytes(name: string, fallback: number): number {
    return Math.max(fallback, this.lastBytes.get(name) ?? 0);
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

  reserve(name: string, bytes: number): void {
    this.reserved.set(name, bytes);
  }

  release(name: string): void {
    this.reserved.delete(name);
    this.measured.delete(name);
  }

  /**
   * A load of `name` measured `inProcessBytes` in the engine's RSS and waits to be charged: until then they are
   * that load's, and a memory monitor pass must not take them for growth of the models that ran.
   */
  measuredLoad(name: string, inProcessBytes: number): void {
    this.measured.set(name, inProcessBytes);
  }

  /** In-process bytes of loads measured and not charged yet (in the engine's RSS, on no model's charge). */
  measuredUnchargedBytes(): number {
    let s = 0;
    for (const b of this.measured.values()) s += b;
    return s;
  }

  /** A load (or reload) finished: charge it. `cold` when the model was not resident before. */
  loaded(name: string, cost: Omit<ModelCost, 'loadBytes'>, loadNs: number, cold = true): void {
    this.release(name);
    this.cost.set(name, { ...cost, loadBytes: cost.bytes });
    this.lastUsed.set(name, this.nowMs());
    this.counts.loads++;
    this.counts.loadNsTotal += loadNs;
    if (cold) {
      const h = this.statsOf(name);
      h.coldLoads++;
      h.coldLoadNsTotal += loadNs;
      h.lastColdLoadNs = loadNs;
    }
  }

  /** The model's charge grew or shrank (an instance added or removed, growth seen while running). */
  adjust(name: string, deltaBytes: number): void {
    const c = this.cost.get(name);
    if (c) c.bytes = Math.max(0, Math.round(c.bytes + deltaBytes));
  }

  /** A Python model's stubs now hold `bytes`: its charge follows. */
  setExternal(name: string, bytes: number): void {
    const c = this.cost.get(name);
    if (!c) return;
    c.bytes = Math.max(0, c.bytes + bytes - c.externalBytes);
    c.externalBytes = bytes;
  }

  loadFailed(name?: string): void {
    this.counts.loadFailures++;
    if (name) this.release(name);
  }

  /** `name` was unloaded; `evicted` when the budget chose it. */
  unloaded(name: string, evicted: boolean): void {
    const c = this.cost.get(name);
    if (c) this.lastBytes.set(name, c.bytes);
    this.cost.delete(name);
    if (evicted) {
      this.counts.evictions++;
      this.statsOf(name).evicted++;
    }
  }

  /** A model was evicted to make room for `name`. */
  causedEviction(name: string): void {
    this.statsOf(name).evictionsCaused++;
  }

  /** Where a cold load of `name` spent its time. */
  notePhases(name: string, roomNs: number, backendNs: number, warmupNs: number): void {
    const h = this.statsOf(name);
    h.coldRoomNsTotal += roomNs;
    h.coldBackendNsTotal += backendNs;
    h.coldWarmupNsTotal += warmupNs;
  }

  private statsOf(name: string): ModelLoadStats {
    let h = this.history.get(name);
    if (!h) this.history.set(name, (h = noStats()));
    return h;
  }

  status(): BudgetStatus {
    const names = new Set([...this.cost.keys(), ...this.history.keys()]);
    return {
      budgetBytes: this.budgetBytes,
      usedBytes: this.usedBytes(),
      unattributedBytes: this.unattributedBytes,
      baselineRssBytes: this.baselineRssBytes,
      ...this.counts,
      models: [...names]
        .map((name) => {
          const c = this.cost.get(name);
          return {
            name,
            resident: !!c,
            bytes: c?.bytes ?? 0,
            loadBytes: c?.loadBytes ?? 0,
            rssDeltaBytes: c?.rssDeltaBytes ?? 0,
            externalBytes: c?.externalBytes ?? 0,
            ...this.statsOf(name),
          };
        })
        .sort((a, b) => (a.name < b.name ? -1 : 1)),
    };
  }
}
