import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { MemoryLeaseStore } from '../../gateway/staging/memory-lease-store.ts';
import { Reaper, type ReaperHost } from '../../gateway/staging/reaper.ts';
import { leaseTransition, ownerPid, regionName, regionOwner } from '../../gateway/staging/region-lease.ts';

const ME = '100xaaaa';
const DEAD = '200xbbbb';
const LIVE = '300xcccc';

function setup() {
  let clock = 10_000;
  const store = new MemoryLeaseStore(() => clock);
  const engineRegions = new Map<string, string>();
  const unregistered: string[] = [];
  const engine = Object.assign(new EventEmitter(), {
    async unregisterRegion(name: string) {
      if (!name) throw new Error('unregister-all attempted');
      unregistered.push(name);
      engineRegions.delete(name);
    },
    async regionStatus() {
      return Object.fromEntries([...engineRegions].map(([name, key]) => [name, { name, key, offset: 0, byte_size: 1 }]));
    },
  });
  const keys = new Set<string>();
  const alive = new Set([100, 300]);
  const host: ReaperHost = {
    unlinkIfExists: (k) => keys.delete(k),
    listKeys: (p) => [...keys].filter((k) => k.startsWith(p)),
    isProcessAlive: (pid) => alive.has(pid),
  };
  const reaper = new Reaper(store, engine, host, { ownerId: ME, prefix: 'tgw', leaseTtlMs: 500 });
  const region = (owner: string, n: number) => {
    const name = regionName('tgw', owner, n);
    keys.add(`/${name}`);
    engineRegions.set(name, `/${name}`);
    return { region: name, key: `/${name}` };
  };
  return { store, reaper, keys, engineRegions, unregistered, alive, region, advance: (ms: number) => (clock += ms) };
}

describe('reaper', () => {
  it('cleans every region of a dead owner once its leases expire', async () => {
    const s = setup();
    const dead = [s.region(DEAD, 0), s.region(DEAD, 1)];
    const mine = s.region(ME, 0);
    await s.store.renew(DEAD, dead, 500);
    await s.store.renew(ME, [mine], 500);
    expect(await s.reaper.tick()).toEqual([]);
    s.advance(600);
    await s.store.renew(ME, [mine], 500); // I am alive and renew
    expect((await s.reaper.tick()).sort()).toEqual(dead.map((d) => d.region).sort());
    expect(s.unregistered.sort()).toEqual(dead.map((d) => d.region).sort());
    expect([...s.keys]).toEqual([mine.key]);
    expect((await s.store.list()).map((l) => l.owner)).toEqual([ME]);
    expect(s.reaper.reapedTotal).toBe(2);
  });

  it('leaves the region of a live owner whose lease lapsed, and lets it renew', async () => {
    const s = setup();
    const r = s.region(LIVE, 0);
    await s.store.renew(LIVE, [r], 500);
    s.advance(600);
    expect(await s.reaper.tick()).toEqual([]);
    expect(s.unregistered).toEqual([]);
    expect(s.keys.has(r.key)).toBe(true);
    expect(await s.store.renew(LIVE, [r], 500)).toEqual([r.region]);
  });

  it('sweep cleans unleased regions of dead owners on /dev/shm and in the engine only', async () => {
    const s = setup();
    const orphan = s.region(DEAD, 0);
    const leased = s.region(DEAD, 1);
    const live = s.region(LIVE, 0);
    const mine = s.region(ME, 0);
    s.engineRegions.set(regionName('tgw', DEAD, 7), '/gone'); // registered, already unlinked
    s.keys.add('/other_200xbbbb_0'); // not under our prefix
    await s.store.renew(DEAD, [leased], 500);
    const cleaned = await s.reaper.sweep();
    expect(cleaned.sort()).toEqual([orphan.region, regionName('tgw', DEAD, 7)].sort());
    expect(s.keys.has(orphan.key)).toBe(false);
    for (const k of [leased.key, live.key, mine.key, '/other_200xbbbb_0']) expect(s.keys.has(k)).toBe(true);
    expect(s.unregistered).not.toContain(leased.region);
  });
});

describe('region names and lease lifecycle', () => {
  it('round-trips owner and pid through region names', () => {
    const name = regionName('tgw', '4242x0f0f', 3);
    expect(name).toBe('tgw_4242x0f0f_3');
    expect(regionOwner('tgw', `/${name}`)).toBe('4242x0f0f');
    expect(regionOwner('tgw', 'tgwx_4242x0f0f_3')).toBeUndefined();
    expect(regionOwner('tgw', 'tgw_nothex_3')).toBeUndefined();
    expect(ownerPid('4242x0f0f')).toBe(4242);
  });

  it('guards lease transitions', () => {
    expect(leaseTransition('r', 'unleased', 'held')).toBe('held');
    expect(leaseTransition('r', 'held', 'lost')).toBe('lost');
    expect(() => leaseTransition('r', 'released', 'held')).toThrow("lease of region 'r': illegal transition from released to held");
  });
});
