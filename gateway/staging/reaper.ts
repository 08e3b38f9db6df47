// The reaper: cleans up shm regions whose owner died. Every gateway runs one.
//
//   tick():  claim expired leases of other owners from the lease store; for
//            each whose owner process is gone, unregister the region from
//            the engine BY NAME (never unregister-all), unlink its key, and
//            release the claim. An owner that is still alive (its lease merely
//            lapsed, e.g. while Redis was away) keeps its region: the claim is
//            dropped and the owner's next heartbeat re-creates the lease.
//   sweep(): at start (and now and then) look at this host's /dev/shm keys
//            and the engine's registered regions under the prefix: any whose
//            owner process is gone and which no lease covers is cleaned too
//            (this is crash cleanup for the in-memory lease store).
//
// Ownership: owns its timer only. Event loop only; tick and sweep never overlap.
import type { EngineApi } from '../upstream/engine-client.ts';
import type { Lease, LeaseStore } from './lease-store.ts';
import { ownerPid, regionOwner } from './region-lease.ts';
import { gatewayLog as log, tracer } from '../../common/logger.ts';

const trace = tracer('leases');

/** Host operations the reaper needs (injectable for tests). */
export interface ReaperHost {
  unlinkIfExists(key: string): boolean;
  listKeys(prefix: string): string[];
  isProcessAlive(pid: number): boolean;
  /** This process's pid (default process.pid). */
  ownPid?: number;
}

export interface ReaperOptions {
  ownerId: string;
  prefix: string;
  leaseTtlMs: number;
  /** Interval of tick() (default leaseTtlMs / 2). */
  intervalMs?: number;
  /** Run sweep() every this many ticks (default 10). */
  sweepEvery?: number;
}

export class Reaper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private ticks = 0;
  /** Regions this reaper has cleaned (for metrics and tests). */
  reapedTotal = 0;

  constructor(
    private readonly store: LeaseStore,
    private readonly engine: Pick<EngineApi, 'unregisterRegion' | 'regionStatus'>,
    private readonly host: ReaperHost,
    private readonly opts: ReaperOptions,
  ) {}

  /** Sweep once now, then tick on an interval. */
  async start(): Promise<void> {
    await this.sweep().catch((e) => log.warn(`start-up sweep failed: ${(e as Error).message}`));
    this.timer = setInterval(() => void this.runTick(), this.opts.intervalMs ?? Math.max(50, this.opts.leaseTtlMs / 2));
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  private runTick(): void {
    if (this.running) return;
    const every = this.opts.sweepEvery ?? 10;
    const work = async () => {
      await this.tick();
      if (++this.ticks % every === 0) await this.sweep();
    };
    this.running = work()
      .catch((e) => trace(`reaper pass failed: ${(e as Error).message}`))
      .finally(() => (this.running = undefined));
  }

  private ownerGone(owner: string): boolean {
    const pid = ownerPid(owner);
    // An owner id we cannot read (another scheme) is judged by its lease alone.
    if (pid === undefined) return true;
    // Our own pid under another owner id: an earlier gateway with the pid we
    // were given again (pid 1 in every container restart). It is gone.
    if (pid === (this.host.ownPid ?? process.pid) && owner !== this.opts.ownerId) return true;
    return !this.host.isProcessAlive(pid);
  }

  /** Claim and clean expired leases of dead owners; returns the regions cleaned. */
  async tick(): Promise<string[]> {
    const claimed = await this.store.claimExpired(this.opts.ownerId, Math.max(this.opts.leaseTtlMs * 2, 1000));
    const cleaned: string[] = [];
    for (const lease of claimed) {
      if (!this.ownerGone(lease.owner)) {
        trace(`lease on '${lease.region}' lapsed but owner ${lease.owner} is alive; leaving it`);
        await this.store.release(this.opts.ownerId, [lease.region]);
        continue;
      }
      if (await this.clean(lease)) cleaned.push(lease.region);
    }
    return cleaned;
  }

  private async clean(lease: Pick<Lease, 'region' | 'key' | 'owner'>): Promise<boolean> {
    try {
      await this.engine.unregisterRegion(lease.region);
    } catch (e) {
      // Engine down: keep the claim; it expires and a later pass retries.
      log.warn(`reaper: could not unregister region '${lease.region}' of dead owner ${lease.owner}: ${(e as Error).message}`);
      return false;
    }
    const unlinked = lease.key ? this.host.unlinkIfExists(lease.key) : false;
    await this.store.release(this.opts.ownerId, [lease.region]);
    this.reapedTotal++;
    log.info(`reaper: cleaned region '${lease.region}' of dead owner ${lease.owner} (unregistered${unlinked ? ', unlinked' : ''})`);
    return true;
  }

  /** Clean regions under the prefix (on /dev/shm and in the engine) whose owner is gone and that no lease covers. */
  async sweep(): Promise<string[]> {
    const { prefix, ownerId } = this.opts;
    const candidates = new Map<string, { key: string; owner: string }>();
    for (const key of this.host.listKeys(`/${prefix}_`)) {
      const owner = regionOwner(prefix, key);
      if (owner && owner !== ownerId) candidates.set(key.slice(1), { key, owner });
    }
    try {
      for (const [name, st] of Object.entries(await this.engine.regionStatus())) {
        const owner = regionOwner(prefix, name);
        if (owner && owner !== ownerId && !candidates.has(name)) candidates.set(name, { key: st.key, owner });
      }
    } catch (e) {
      trace(`sweep: engine region status unavailable: ${(e as Error).message}`);
    }
    const cleaned: string[] = [];
    for (const [region, c] of candidates) {
      if (!this.ownerGone(c.owner)) continue;
      if (await this.store.get(region)) continue; // leased: tick() decides once it expires
      if (await this.clean({ region, key: c.key, owner: c.owner })) cleaned.push(region);
    }
    return cleaned;
  }
}
