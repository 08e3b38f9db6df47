// What the engine reports about sharing the machine (response cache, memory
// budget, on-demand loading), for the metrics endpoint.
import type { CacheStoreStats } from '../sharing/response-cache.ts';
import type { BudgetStatus } from '../sharing/model-memory-budget.ts';

export interface SharingStatus {
  /** The response cache's counters; absent without --cache-config. */
  cache?: CacheStoreStats & { kind: 'local' | 'redis' };
  /** The memory budget's books; absent without --model-memory-budget. */
  budget?: BudgetStatus;
}
