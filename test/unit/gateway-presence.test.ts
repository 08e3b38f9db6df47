// GatewayPresence on a real redis-server: a gateway that stops heartbeating
// is cleaned up by another one only once its jobs have been claimed; its
// host's lease records go when no live gateway is left in that namespace
// (and stay while one is); a gateway that was only paused comes back; a
// gateway that stops gracefully deregisters itself.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { GatewayPresence, parseMember } from '../../gateway/upstream/gateway-presence.ts';
import { RedisLeaseStore } from '../../gateway/staging/redis-lease-store.ts';
import { RedisJobQueue } from '../../gateway/jobs/redis-job-queue.ts';
import { TestRedis } from '../integration/L0_gateway-support.ts';

const TTL = 600; // long enough that a loaded machine does not expire a gateway between its beat and the reap
let redis: TestRedis;
let r: Redis;
const closers: Array<() => Promise<unknown> | void> = [];
const sleep = (ms: number) => new Promise((res) => setTimeout(res, ms));

beforeAll(async () => {
  redis = await TestRedis.start();
  r = new Redis(redis.url);
});
afterAll(async () => {
  for (const c of closers) await c();
  r.disconnect();
  await redis.stop();
});

function presence(ownerId: string, leaseNamespace: string, namespace: string): GatewayPresence {
  const p = new GatewayPresence(redis.url, { namespace, ownerId, leaseNamespace, ttlMs: TTL });
  closers.push(() => p.stop());
  return p;
}

describe('GatewayPresence', () => {
  it('parses members', () => {
    expect(parseMember('123xab tgw:host-a')).toEqual({ ownerId: '123xab', leaseNamespace: 'tgw:host-a' });
  });

  it('a dead gateway is reaped after its pending jobs are claimed; its host lease records go with the last gateway of the host', async () => {
    const ns = 'p1';
    const leases = new RedisLeaseStore(redis.url, { namespace: 'p1:hostB' });
    const queue = new RedisJobQueue(redis.url, { namespace: ns });
    closers.push(
      () => leases.close(),
      () => queue.close(),
    );
    await leases.ready(3000);
    const live = presence('1xa', 'p1:hostA', ns);
    const dead = presence('2xb', 'p1:hostB', ns);
    const sibling = presence('3xc', 'p1:hostB', ns); // a second gateway on host B, still alive for now
    await Promise.all([live.beat(), dead.beat(), sibling.beat()]);
    await leases.renew('2xb', [{ region: 'tgw_2xb_0', key: '/tgw_2xb_0' }], 60_000);
    await queue.enqueue({ fn: 'f', retentionMs: 60_000 });
    expect(await queue.take('2xb', 1, 0)).toHaveLength(1); // the dead gateway holds a job

    await sleep(TTL + 50);
    await sibling.beat();
    await live.beat();
    // Dead but still holding a job: nothing is deleted yet.
    expect((await live.reap()).gateways).toEqual([]);
    expect(await r.zrange(`${ns}:gateways:dead`, '0', '-1')).toEqual(['2xb p1:hostB']);
    // A survivor claims the job; after the claim lapses the reaper cleans up. Host B still has
    // a live gateway, so its lease records stay (that host's own reaper handles them by pid).
    expect(await queue.reclaim('1xa', 0, 10)).toHaveLength(1);
    await sleep(TTL + 20);
    await sibling.beat();
    await live.beat();
    const out = await live.reap();
    expect(out).toEqual({ gateways: ['2xb'], leaseNamespaces: [], leaseRecords: 0 });
    expect(await r.exists('p1:hostB:lease:tgw_2xb_0')).toBe(1);
    const consumers = (await r.call('XINFO', 'CONSUMERS', `${ns}:jobs:stream`, 'runners')) as unknown[][];
    expect(consumers.map((c) => String(c[1]))).toEqual(['1xa']);

    // Now the sibling dies too (no pending jobs): host B's lease records are dropped.
    await sleep(TTL + 50);
    await live.beat();
    expect(await live.reap()).toEqual({ gateways: ['3xc'], leaseNamespaces: ['p1:hostB'], leaseRecords: 1 });
    expect(await r.keys('p1:hostB:*')).toEqual([]);
    expect(await r.zrange(`${ns}:gateways`, '0', '-1')).toEqual(['1xa p1:hostA']);
    expect(await r.zrange(`${ns}:gateways:dead`, '0', '-1')).toEqual([]);
  });

  it('a gateway that was only paused comes back: heartbeat re-adds it, renewals re-create its leases', async () => {
    const ns = 'p2';
    const leases = new RedisLeaseStore(redis.url, { namespace: 'p2:hostP' });
    closers.push(() => leases.close());
    await leases.ready(3000);
    const reaper = presence('5xe', 'p2:hostR', ns);
    const paused = presence('4xd', 'p2:hostP', ns);
    await paused.beat();
    await leases.renew('4xd', [{ region: 'tgw_4xd_0', key: '/tgw_4xd_0' }], 60_000);
    await sleep(TTL + 50);
    await reaper.beat();
    expect((await reaper.reap()).leaseNamespaces).toEqual(['p2:hostP']);
    expect(await r.exists('p2:hostP:lease:tgw_4xd_0')).toBe(0);
    await paused.beat();
    expect(await leases.renew('4xd', [{ region: 'tgw_4xd_0', key: '/tgw_4xd_0' }], 60_000)).toEqual(['tgw_4xd_0']);
    expect((await r.zrange(`${ns}:gateways`, '0', '-1')).sort()).toEqual(['4xd p2:hostP', '5xe p2:hostR']);
    expect((await reaper.reap()).gateways).toEqual([]);
  });

  it('a graceful stop deregisters at once: member and job consumer gone, nothing left to reap', async () => {
    const ns = 'p3';
    const queue = new RedisJobQueue(redis.url, { namespace: ns });
    closers.push(() => queue.close());
    const a = presence('6xf', 'p3:hostA', ns);
    const b = new GatewayPresence(redis.url, { namespace: ns, ownerId: '7xa', leaseNamespace: 'p3:hostB', ttlMs: 60_000 });
    await a.beat();
    await b.start();
    const j = await queue.enqueue({ fn: 'f', retentionMs: 60_000 });
    const [t] = await queue.take('7xa', 1, 0); // b's runner had a job and finished it
    await queue.ack(t!.entry);
    expect(t!.id).toBe(j.id);
    await b.stop();
    expect(await r.zrange(`${ns}:gateways`, '0', '-1')).toEqual(['6xf p3:hostA']);
    expect(await r.zrange(`${ns}:gateways:dead`, '0', '-1')).toEqual([]);
    const consumers = (await r.call('XINFO', 'CONSUMERS', `${ns}:jobs:stream`, 'runners')) as unknown[][];
    expect(consumers.map((c) => String(c[1]))).toEqual([]);
    expect((await a.reap()).gateways).toEqual([]);
  });

  it('a graceful stop that leaves jobs pending keeps its consumer and is reaped only after they are claimed', async () => {
    const ns = 'p4';
    const queue = new RedisJobQueue(redis.url, { namespace: ns });
    closers.push(() => queue.close());
    const a = presence('8xa', 'p4:hostA', ns);
    const b = new GatewayPresence(redis.url, { namespace: ns, ownerId: '9xb', leaseNamespace: 'p4:hostB', ttlMs: 60_000 });
    await a.beat();
    await b.start();
    await queue.enqueue({ fn: 'f', retentionMs: 60_000 });
    expect(await queue.take('9xb', 1, 0)).toHaveLength(1); // its drain timed out with this job in hand
    await b.stop();
    expect((await a.reap()).gateways).toEqual([]); // deleting the consumer now would drop the job
    expect(await queue.reclaim('8xa', 0, 10)).toHaveLength(1);
    await sleep(TTL + 20);
    await a.beat();
    expect((await a.reap()).gateways).toEqual(['9xb']);
  });
});
