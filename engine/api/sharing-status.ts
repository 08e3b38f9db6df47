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
  /** Bytes charged against the budget now: at load, plus growth seen while running. */
  bytes: number;
  /** Bytes charged when the load (and its warmup) finished. */
  loadBytes: number;
  /** The engine process's RSS growth across the load and warmup (when no other load overlapped it). */
  rssDeltaBytes: number;
  /** Of `bytes`, what the model's own processes hold (Python stubs, by their RSS). */
  externalBytes: number;
}

export interface ModelLoadStats {
  /** Budgeted loads of this model (each after it was not resident). */
  coldLoads: number;
  coldLoadNsTotal: number;
  lastColdLoadNs: number;
  /** Other models unloaded to make room for this one. */
  evictionsCaused: number;
  /** Times this model was unloaded to make room for another. */
  evicted: number;
  /** Of coldLoadNsTotal: waiting for room (evictions included), the backend starting instances, warmup. */
  coldRoomNsTotal: number;
  coldBackendNsTotal: number;
  coldWarmupNsTotal: number;
}

export interface BudgetStatus {
  budgetBytes: number;
  usedBytes: number;
  /** Bytes above the empty engine that no loaded model is charged with (allocator retention, the engine's own buffers). */
  unattributedBytes: number;
  /** The engine's RSS when no model was loaded (the monitor's baseline); 0 before it is known. */
  baselineRssBytes: number;
  loads: number;
  loadFailures: number;
  evictions: number;
  loadNsTotal: number;
  models: Array<{ name: string; resident: boolean } & ModelCost & ModelLoadStats>;
}

export interface SharingStatus {
  /** The response cache's counters; absent without --cache-config. */
  cache?: CacheStoreStats & { kind: 'local' | 'redis' };
  /** The memory budget's books; absent without --model-memory-budget. */
  budget?: BudgetStatus;
}
