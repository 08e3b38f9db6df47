// What the engine reports about sharing the machine (response cache, memory
// budget, on-demand loading), for the metrics endpoint. The report types live
// here, in the contract, so frontends read them without importing the
// sharing tools that fill them (engine/sharing/ re-exports them).

export interface CacheStoreStats {
  entries: number;
  bytes: number;
  capacity: number;
  lookups: number;
  hits: number;
  misses: number;
  evictions: number;
}

export interface ModelCost {
  /** Bytes charged against the budget. */
  bytes: number;
  /** The process RSS growth seen across the load (shown, not charged when the backend reports its own figure). */
  rssDeltaBytes: number;
}

export interface BudgetStatus {
  budgetBytes: number;
  usedBytes: number;
  loads: number;
  loadFailures: number;
  evictions: number;
  loadNsTotal: number;
  models: Array<{ name: string } & ModelCost>;
}

export interface SharingStatus {
  /** The response cache's counters; absent without --cache-config. */
  cache?: CacheStoreStats & { kind: 'local' | 'redis' };
  /** The memory budget's books; absent without --model-memory-budget. */
  budget?: BudgetStatus;
}
