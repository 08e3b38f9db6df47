// Leases on shm regions: who owns a region and until when. One interface,
// two stores (memory-lease-store.ts, redis-lease-store.ts). An owner renews
// its leases by heartbeat; a reaper claims leases whose owner stopped
// renewing, cleans the region up, then releases the claim.
import type { EventEmitter } from 'node:events';

/** One lease: region name (as registered with the engine), its shm key, owner, expiry (ms since epoch, store clock). */
export interface Lease {
  region: string;
  key: string;
  owner: string;
  expiresAt: number;
}

export type LeaseStoreState = 'up' | 'down';

/**
 * Emits 'state' (LeaseStoreState) when the store becomes reachable or not.
 * Every method rejects while the store is down.
 */
export interface LeaseStore extends EventEmitter {
  readonly kind: 'memory' | 'redis';
  readonly state: LeaseStoreState;
  /**
   * Create or extend `owner`'s leases for the regions; a region leased to
   * another owner (expired or not) is left alone. Returns the regions `owner`
   * holds after the call.
   */
  renew(owner: string, regions: ReadonlyArray<{ region: string; key: string }>, ttlMs: number): Promise<string[]>;
  /** Drop `owner`'s leases on the regions; returns how many were dropped. */
  release(owner: string, regions: readonly string[]): Promise<number>;
  /**
   * Take up to `limit` expired leases of OTHER owners: each becomes `claimer`'s
   * for claimTtlMs. Returned with the previous owner, so the caller can tell
   * whose region it is cleaning.
   */
  claimExpired(claimer: string, claimTtlMs: number, limit?: number): Promise<Lease[]>;
  get(region: string): Promise<Lease | null>;
  list(): Promise<Lease[]>;
  close(): Promise<void>;
}

/** Lease of `owner` on one region: renew([...]) including it and report whether it is held. */
export async function acquire(store: LeaseStore, owner: string, region: string, key: string, ttlMs: number): Promise<boolean> {
  return (await store.renew(owner, [{ region, key }], ttlMs)).includes(region);
}
