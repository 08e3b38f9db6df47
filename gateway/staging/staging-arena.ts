// The staging arena: a few large shm regions this gateway creates, touches
// and registers with the engine once at start, then sub-allocates by offset
// for the bodies and outputs of staged calls (never a region per request).
// Each region is leased in the lease store and renewed by heartbeat; staging
// is offered only while the region is registered, its lease held and fresh,
// the store reachable and the engine up. Otherwise calls go inline.
// Regions are reserved page by page at creation (posix_fallocate): a full
// /dev/shm is found here (ENOSPC), never as a region the engine reads as
// shrunk. Regions that could not be reserved are retried every heartbeat;
// meanwhile the arena reports shared memory exhausted.
//
// Ownership: owns its regions (mappings, keys, registrations, leases) and
// the heartbeat timer. Slices are owned by the call that allocated them until
// it calls release(). Event loop only.
import { destroySharedMemoryRegion, type ShmRegionHandle } from '../../client/shared-memory.ts';
import { reserveRegions } from './region-reserve.ts';
import type { EngineApi } from '../upstream/engine-client.ts';
import type { LeaseStore } from './lease-store.ts';
import { leaseTransition, regionName, type RegionLeaseState } from './region-lease.ts';
import { SliceAllocator } from './slice-allocator.ts';
import { gatewayLog as log, tracer } from '../../common/logger.ts';

const trace = tracer('staging');

export interface StagingArenaOptions {
  ownerId: string;
  /** Key/name prefix shared by every gateway of this host (default 'tgw'). */
  prefix?: string;
  regionCount: number;
  regionBytes: number;
  leaseTtlMs: number;
}

/** Why a call that wanted a slice got none. */
export type NoSliceReason = 'shm_exhausted' | 'unavailable' | 'no_room';

/** A piece of one region handed to one call. */
export interface StagingSlice {
  readonly region: string;
  readonly offset: number;
  /** Exactly the bytes asked for, viewing the region (no copy). */
  readonly bytes: Uint8Array;
  release(): void;
}

interface Region {
  handle: ShmRegionHandle;
  alloc: SliceAllocator;
  registered: boolean;
  lease: RegionLeaseState;
  /** Local deadline of the lease (renewal time + ttl - margin). */
  validUntil: number;
}

export class StagingArena {
  readonly ownerId: string;
  readonly prefix: string;
  private readonly regions: Region[] = [];
  private heartbeat: NodeJS.Timeout | undefined;
  private stopping = false;
  private renewing: Promise<void> | undefined;
  private registering: Promise<void> | undefined;
  /** Set while some region could not be reserved because shared memory is full; cleared once every region exists. */
  private exhausted: { since: number; error: string } | undefined;
  private readonly onEngineUp = () => {
    // The engine was away: it may have restarted and forgotten every region.
    for (const r of this.regions) r.registered = false;
    void this.registerAll();
  };
  private readonly onStoreState = (s: string) => {
    if (s === 'up') void this.renew();
  };

  constructor(
    private readonly engine: EngineApi,
    private readonly store: LeaseStore,
    private readonly opts: StagingArenaOptions,
  ) {
    this.ownerId = opts.ownerId;
    this.prefix = opts.prefix ?? 'tgw';
  }

  /** Create, touch, register and lease every region; start the heartbeat. */
  async start(): Promise<void> {
    try {
      this.createMissing();
    } catch (e) {
      for (const r of this.regions.splice(0)) destroySharedMemoryRegion(r.handle);
      throw e;
    }
    await this.renew();
    await this.registerAll();
    this.engine.on('up', this.onEngineUp);
    this.store.on('state', this.onStoreState);
    this.heartbeat = setInterval(() => void this.renew(), Math.max(50, Math.floor(this.opts.leaseTtlMs / 3)));
    this.heartbeat.unref();
    log.info(
      `staging arena: ${this.regions.length} of ${this.opts.regionCount} x ${this.opts.regionBytes} bytes under '${this.prefix}_${this.ownerId}_*' (${this.store.kind} leases)`,
    );
  }

  /**
   * Create the regions not created yet, in order, each reserved whole. Stops
   * at the first that shared memory cannot hold (ENOSPC / ENOMEM: the arena is
   * then exhausted until a later try succeeds); any other error is thrown.
   */
  private createMissing(): void {
    const { regionCount: count, regionBytes: bytes } = this.opts;
    const got = reserveRegions(this.prefix, this.ownerId, this.regions.length, count, bytes);
    for (const handle of got.handles) {
      this.regions.push({ handle, alloc: new SliceAllocator(bytes), registered: false, lease: 'unleased', validUntil: 0 });
    }
    if (got.full && !this.exhausted) {
      log.warn(
        `shared memory exhausted: could not reserve ${bytes} bytes for staging region ${this.regions.length} (${got.full.message}); ` +
          `${this.regions.length} of ${count} regions, large calls go inline; retried every heartbeat`,
      );
      this.exhausted = { since: Date.now(), error: got.full.errno };
    } else if (!got.full && this.exhausted) {
      log.info(`shared memory available again: all ${count} staging regions reserved`);
      this.exhausted = undefined;
    }
  }

  /** Whether some region is missing because shared memory is full. */
  get shmExhausted(): boolean {
    return this.exhausted !== undefined;
  }

  /** Why alloc() just returned null: shared memory full, staging off (engine, store, leases), or every region busy. */
  whyNoSlice(): NoSliceReason {
    if (this.exhausted) return 'shm_exhausted';
    const now = Date.now();
    return this.regions.some((r) => this.usable(r, now)) ? 'no_room' : 'unavailable';
  }

  /** Region names and shm keys of this arena. */
  get regionKeys(): Array<{ region: string; key: string }> {
    return this.regions.map((r) => ({ region: r.handle.name, key: r.handle.key }));
  }

  /** Whether staging is possible right now, and if not, why. */
  status(): {
    staging: boolean;
    reason?: string;
    shmExhausted: boolean;
    regions: number;
    leasesHeld: number;
    bytesInUse: number;
    capacity: number;
  } {
    const now = Date.now();
    const usable = this.regions.filter((r) => this.usable(r, now)).length;
    const bytesInUse = this.regions.reduce((n, r) => n + r.alloc.bytesInUse, 0);
    const leasesHeld = this.regions.filter((r) => r.lease === 'held' && r.validUntil > now).length;
    const capacity = this.regions.length * this.opts.regionBytes;
    let reason: string | undefined;
    if (this.stopping) reason = 'shutting down';
    else if (this.store.state !== 'up') reason = `${this.store.kind} lease store unreachable`;
    else if (!this.engine.up) reason = 'engine unavailable';
    else if (this.exhausted)
      reason = `shared memory exhausted: ${this.regions.length} of ${this.opts.regionCount} staging regions could be reserved (${this.exhausted.error})`;
    else if (!usable) reason = 'no region is registered with a held lease';
    return { staging: usable > 0, reason, shmExhausted: !!this.exhausted, regions: this.regions.length, leasesHeld, bytesInUse, capacity };
  }

  /** A slice of `size` bytes, or null when staging is off or no region has room (the caller goes inline). */
  alloc(size: number): StagingSlice | null {
    const now = Date.now();
    for (const r of this.regions) {
      if (!this.usable(r, now)) continue;
      const block = r.alloc.alloc(size);
      if (!block) continue;
      let released = false;
      trace(`alloc ${size} bytes at ${r.handle.name}+${block.offset}`);
      return {
        region: r.handle.name,
        offset: block.offset,
        bytes: r.handle.bytes.subarray(block.offset, block.offset + size),
        release: () => {
          if (released) return;
          released = true;
          r.alloc.release(block.offset);
        },
      };
    }
    return null;
  }

  /** Check the engine still knows every region; re-register the missing ones. Returns how many were missing. */
  async verifyRegistration(): Promise<string[]> {
    const known = await this.engine.regionStatus();
    const missing = this.regions.filter((r) => !known[r.handle.name]);
    for (const r of missing) r.registered = false;
    if (missing.length) await this.registerAll();
    return missing.map((r) => r.handle.name);
  }

  /** Register every region not yet registered, by name: unregister that name first (never all), then register. Single flight. */
  registerAll(): Promise<void> {
    this.registering ??= this.registerOnce().finally(() => (this.registering = undefined));
    return this.registering;
  }

  private async registerOnce(): Promise<void> {
    for (const r of this.regions) {
      if (this.stopping) return;
      if (r.registered) continue;
      try {
        await this.engine.unregisterRegion(r.handle.name);
        await this.engine.registerRegion(r.handle.name, r.handle.key, r.handle.byteSize);
        r.registered = true;
      } catch (e) {
        r.registered = false;
        log.warn(`could not register shm region '${r.handle.name}' with the engine: ${(e as Error).message}`);
      }
    }
  }

  /** One heartbeat: renew every lease; regions held by another owner become `lost`. */
  renew(): Promise<void> {
    this.renewing ??= this.renewOnce().finally(() => (this.renewing = undefined));
    return this.renewing;
  }

  private async renewOnce(): Promise<void> {
    if (this.stopping) return;
    if (this.exhausted) {
      try {
        this.createMissing();
      } catch (e) {
        log.warn(`could not create a staging region: ${(e as Error).message}`);
      }
    }
    if (!this.regions.length) return;
    const started = Date.now();
    let held: string[];
    try {
      held = await this.store.renew(this.ownerId, this.regionKeys, this.opts.leaseTtlMs);
    } catch (e) {
      trace(`lease renewal failed: ${(e as Error).message}`);
      return; // leases lapse locally at validUntil; staging stops then (or at once if the store reports down)
    }
    if (this.stopping) return;
    // Margin: the store's clock started the ttl no earlier than `started`.
    const validUntil = started + this.opts.leaseTtlMs - Math.min(200, this.opts.leaseTtlMs / 5);
    for (const r of this.regions) {
      if (held.includes(r.handle.name)) {
        if (r.lease !== 'held') log.info(`lease on region '${r.handle.name}' is held`);
        r.lease = leaseTransition(r.handle.name, r.lease, 'held');
        r.validUntil = validUntil;
        if (!r.registered && this.engine.up) void this.registerAll();
      } else {
        if (r.lease !== 'lost') log.warn(`lease on region '${r.handle.name}' is held by another owner; not staging there`);
        r.lease = leaseTransition(r.handle.name, r.lease, 'lost');
      }
    }
  }

  private usable(r: Region, now: number): boolean {
    return !this.stopping && r.registered && r.lease === 'held' && r.validUntil > now && this.store.state === 'up' && this.engine.up;
  }

  /**
   * Shut down: stop staging, wait (up to drainMs) for slices in use, then
   * unregister every region by name, unmap and unlink it, release its lease.
   */
  async stop(drainMs = 5000): Promise<void> {
    this.stopping = true;
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.engine.off('up', this.onEngineUp);
    this.store.off('state', this.onStoreState);
    await this.renewing;
    await this.registering;
    const deadline = Date.now() + drainMs;
    while (this.regions.some((r) => r.alloc.liveBlocks > 0) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    for (const r of this.regions) {
      try {
        await this.engine.unregisterRegion(r.handle.name);
      } catch (e) {
        log.warn(`could not unregister shm region '${r.handle.name}': ${(e as Error).message}`);
      }
      destroySharedMemoryRegion(r.handle);
      r.lease = leaseTransition(r.handle.name, r.lease, 'released');
    }
    try {
      await this.store.release(
        this.ownerId,
        this.regions.map((r) => r.handle.name),
      );
    } catch (e) {
      log.warn(`could not release leases (they will expire): ${(e as Error).message}`);
    }
    this.regions.length = 0;
  }
}
