// In-process lease store: the default when no Redis is configured. Leases
// live in a Map and do not survive the process, so with this store crash
// cleanup is the start-up sweep of reaper.ts (owner pid no longer alive).
//
// Ownership: owns its Map; event loop only; the clock is injectable for tests.
import { EventEmitter } from 'node:events';
import type { Lease, LeaseStore, LeaseStoreState } from './lease-store.ts';

export class MemoryLeaseStore extends EventEmitter implements LeaseStore {
  readonly kind = 'memory' as const;
  readonly state: LeaseStoreState = 'up';
  private readonly leases = new Map<string, Lease>();

  constructor(private readonly now: () => number = Date.now) {
    super();
  }

  async renew(owner: string, regions: ReadonlyArray<{ region: string; key: string }>, ttlMs: number): Promise<string[]> {
    const held: string[] = [];
    const t = this.now();
    for (const { region, key } of regions) {
      const cur = this.leases.get(region);
      if (cur && cur.owner !== owner) continue;
      this.leases.set(region, { region, key, owner, expiresAt: t + ttlMs });
      held.push(region);
    }
    return held;
  }

  async release(owner: string, regions: readonly string[]): Promise<number> {
    let n = 0;
    for (const r of regions) {
      if (this.leases.get(r)?.owner === owner) {
        this.leases.delete(r);
        n++;
      }
    }
    return n;
  }

  async claimExpired(claimer: string, claimTtlMs: number, limit = 100): Promise<Lease[]> {
    const t = this.now();
    const out: Lease[] = [];
    for (const l of this.leases.values()) {
      if (out.length >= limit) break;
      if (l.expiresAt > t || l.owner === claimer) continue;
      out.push({ ...l });
      this.leases.set(l.region, { ...l, owner: claimer, expiresAt: t + claimTtlMs });
    }
    return out;
  }

  async get(region: string): Promise<Lease | null> {
    const l = this.leases.get(region);
    return l ? { ...l } : null;
  }

  async list(): Promise<Lease[]> {
    return [...this.leases.values()].map((l) => ({ ...l }));
  }

  async close(): Promise<void> {
    this.leases.clear();
  }
}
