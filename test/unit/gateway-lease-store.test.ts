import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquire, type LeaseStore } from '../../gateway/staging/lease-store.ts';
import { MemoryLeaseStore } from '../../gateway/staging/memory-lease-store.ts';
import { RedisLeaseStore } from '../../gateway/staging/redis-lease-store.ts';
import { TestRedis } from '../integration/L0_gateway-support.ts';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const R = (region: string) => ({ region, key: `/${region}` });

// The same contract for both stores; `expire` makes time pass by `ms`.
function contract(name: string, make: () => Promise<{ store: LeaseStore; expire: (ms: number) => Promise<void> }>) {
  describe(`${name} lease store`, () => {
    it('renew creates, extends, and never takes another owner’s lease', async () => {
      const { store } = await make();
      expect(await store.renew('A', [R('r1'), R('r2')], 1000)).toEqual(['r1', 'r2']);
      expect(await store.renew('B', [R('r1'), R('r3')], 1000)).toEqual(['r3']);
      const l = await store.get('r1');
      expect(l).toMatchObject({ region: 'r1', key: '/r1', owner: 'A' });
      expect(await acquire(store, 'A', 'r1', '/r1', 1000)).toBe(true);
      expect(await acquire(store, 'B', 'r1', '/r1', 1000)).toBe(false);
      expect((await store.list()).map((x) => x.region).sort()).toEqual(['r1', 'r2', 'r3']);
      await store.close();
    });

    it('release drops only the owner’s leases', async () => {
      const { store } = await make();
      await store.renew('A', [R('a1'), R('a2')], 1000);
      expect(await store.release('B', ['a1'])).toBe(0);
      expect(await store.release('A', ['a1', 'zz'])).toBe(1);
      expect(await store.get('a1')).toBeNull();
      expect(await store.get('a2')).not.toBeNull();
      await store.close();
    });

    it('claimExpired takes only expired leases of other owners, once', async () => {
      const { store, expire } = await make();
      await store.renew('dead', [R('d1'), R('d2')], 100);
      await store.renew('me', [R('m1')], 100);
      await store.renew('live', [R('l1')], 60_000);
      expect(await store.claimExpired('me', 5000)).toEqual([]);
      await expire(150);
      const claimed = await store.claimExpired('me', 5000);
      expect(claimed.map((l) => l.region).sort()).toEqual(['d1', 'd2']);
      expect(claimed.every((l) => l.owner === 'dead' && l.key === `/${l.region}`)).toBe(true);
      expect((await store.get('d1'))!.owner).toBe('me');
      // A second reaper cannot take the fresh claims (only 'me''s own lapsed lease).
      expect((await store.claimExpired('other', 5000)).map((l) => l.region)).toEqual(['m1']);
      // The dead owner cannot renew a claimed lease.
      expect(await store.renew('dead', [R('d1')], 1000)).toEqual([]);
      expect(await store.release('me', ['d1', 'd2'])).toBe(2);
      await store.close();
    });

    it('a lapsed owner that renews before any claim keeps its lease', async () => {
      const { store, expire } = await make();
      await store.renew('A', [R('x')], 100);
      await expire(150);
      expect(await store.renew('A', [R('x')], 1000)).toEqual(['x']);
      expect(await store.claimExpired('B', 1000)).toEqual([]);
      await store.close();
    });
  });
}

let clock = 1_000_000;
contract('memory', async () => ({
  store: new MemoryLeaseStore(() => clock),
  expire: async (ms) => {
    clock += ms;
  },
}));

describe('redis', () => {
  let redis: TestRedis;
  let n = 0;
  beforeAll(async () => {
    redis = await TestRedis.start();
  });
  afterAll(async () => {
    await redis?.stop();
  });
  contract('redis', async () => {
    const store = new RedisLeaseStore(redis.url, { namespace: `t${n++}` });
    await store.ready();
    return { store, expire: (ms) => sleep(ms) };
  });

  it('reports down while Redis is gone and up again when it returns, failing fast meanwhile', async () => {
    const store = new RedisLeaseStore(redis.url, { namespace: 'outage' });
    await store.ready();
    const states: string[] = [];
    store.on('state', (s) => states.push(s));
    await redis.stop();
    await new Promise<void>((r) => (store.state === 'down' ? r() : store.once('state', () => r())));
    const t0 = Date.now();
    await expect(store.renew('A', [R('q')], 1000)).rejects.toThrow();
    expect(Date.now() - t0).toBeLessThan(1500);
    await redis.start();
    await store.ready(10_000);
    expect(await store.renew('A', [R('q')], 1000)).toEqual(['q']);
    expect(states).toEqual(['down', 'up']);
    await store.close();
  });
});
