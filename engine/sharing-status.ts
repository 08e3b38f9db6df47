// What the engine reports about sharing the machine (response cache, memory
// budget, on-demand loading), for the metrics endpoint.
import type { CacheStoreStats } from './response-cache.ts';

export interface SharingStatus {
  /** The response cache's counters; absent without --cache-config. */
  cache?: CacheStoreStats & { kind: 'local' | 'redis' };
}
