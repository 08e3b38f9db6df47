// Which gateways are alive, across hosts, and the cleanup of those that died
// without a goodbye (SIGKILL, a lost node, an evicted pod). Only with Redis.
//
// Each gateway heartbeats one member `<ownerId> <leaseNamespace>` of the
// sorted set `<ns>:gateways`, scored by its expiry on the Redis clock. A
// member past its expiry moves (atomically, one Lua script) to
// `<ns>:gateways:dead`, where any live gateway claims it for a while (so
// reapers on several hosts do not repeat each other's work) and cleans up:
//
//   - the dead gateway's consumer in the job group, once it holds no pending
//     entries (the survivors' XAUTOCLAIM moves them first; deleting a consumer
//     with pending entries would drop those jobs, so until then it waits);
//   - when no live gateway is left in its lease namespace (the host's scope,
//     `tgw:<hostname>` by default), that namespace's lease records: their
//     regions lived in the dead host's /dev/shm and engine, which went with
//     it, and nothing on another host could ever claim them (the reaper judges
//     owners by pid, which only means something on the owner's host).
//
// A gateway stopped gracefully (SIGTERM) removes its own member and job
// consumer on the way out (stop()), so it is not listed until reaped.
//
// A gateway that was only paused (Redis away longer than the TTL) loses
// nothing for good: its next heartbeat re-adds it, its lease renewals
// re-create the lease records, and XREADGROUP re-creates its consumer.
//
// Ownership: owns one ioredis connection and its timer. Event loop only.
import { Redis } from 'ioredis';
import { gatewayLog as log, tracer } from '../../common/logger.ts';

const trace = tracer('leases');

const NOW = `local t = redis.call('TIME'); local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;

// KEYS = live, dead; ARGV = member, ttl. Heartbeat: alive until now + ttl.
const BEAT = `${NOW}
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
return now`;

// KEYS = live, dead; ARGV = claim ms, limit. Moves expired members to dead, then
// claims up to limit dead members due now (score = now + claim ms). Returns
// [claimed members..., '|', live members...].
const CLAIM = `${NOW}
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do
  redis.call('ZREM', KEYS[1], m)
  redis.call('ZADD', KEYS[2], now, m)
end
local out = {}
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))) do
  redis.call('ZADD', KEYS[2], now + tonumber(ARGV[1]), m)
  out[#out + 1] = m
end
out[#out + 1] = '|'
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')) do out[#out + 1] = m end
return out`;

// KEYS = lease index of a namespace; ARGV = namespace. Deletes every lease record of it.
const DROP_LEASES = `
local n = 0
for _, region in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  n = n + redis.call('DEL', ARGV[1] .. ':lease:' .. region)
end
redis.call('DEL', KEYS[1])
return n`;

export interface PresenceOptions {
  /** Redis key namespace shared by all replicas (jobs, bundles); default `tgw`. */
  namespace?: string;
  ownerId: string;
  /** This gateway's lease namespace (its host's scope). */
  leaseNamespace: string;
  /** A gateway silent this long is dead (ms). Heartbeat every ttl/3. */
  ttlMs: number;
}

/** What one reap pass cleaned. */
export interface ReapedGateways {
  gateways: string[];
  leaseNamespaces: string[];
  leaseRecords: number;
}

/** A member `<ownerId> <leaseNamespace>` split in two. */
export function parseMember(m: string): { ownerId: string; leaseNamespace: string } {
  const i = m.indexOf(' ');
  return i < 0 ? { ownerId: m, leaseNamespace: '' } : { ownerId: m.slice(0, i), leaseNamespace: m.slice(i + 1) };
}

export class GatewayPresence {
  private readonly redis: Redis;
  private readonly live: string;
  private readonly dead: string;
  private readonly stream: string;
  private readonly member: string;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  /** Gateways this one has cleaned up after (for metrics and tests). */
  reapedTotal = 0;

  constructor(
    url: string,
    private readonly o: PresenceOptions,
  ) {
    const ns = o.namespace ?? 'tgw';
    this.live = `${ns}:gateways`;
    this.dead = `${ns}:gateways:dead`;
    this.stream = `${ns}:jobs:stream`; // the job queue's stream and group (redis-job-queue.ts)
    this.member = `${o.ownerId} ${o.leaseNamespace}`;
    this.redis = new Redis(url, {
      maxRetriesPerRequest: 1,
      commandTimeout: 2000,
      connectTimeout: 2000,
      retryStrategy: (n) => Math.min(100 * n, 1000),
    });
    this.redis.on('error', () => undefined); // a failed pass is retried on the next tick
    this.redis.defineCommand('tgwBeat', { numberOfKeys: 2, lua: BEAT });
    this.redis.defineCommand('tgwClaimDead', { numberOfKeys: 2, lua: CLAIM });
    this.redis.defineCommand('tgwDropLeases', { numberOfKeys: 1, lua: DROP_LEASES });
  }

  private get cmd() {
    return this.redis as unknown as {
      tgwBeat(live: string, dead: string, member: string, ttl: number): Promise<number>;
      tgwClaimDead(live: string, dead: string, claimMs: number, limit: number): Promise<string[]>;
      tgwDropLeases(index: string, ns: string): Promise<number>;
    };
  }

  /** Heartbeat now, then heartbeat and reap every ttl/3. */
  async start(): Promise<void> {
    await this.beat().catch((e) => log.warn(`presence heartbeat failed: ${(e as Error).message}`));
    this.timer = setInterval(
      () => {
        if (this.running) return;
        this.running = this.beat()
          .then(() => this.reap())
          .catch((e) => trace(`presence pass failed: ${(e as Error).message}`))
          .finally(() => (this.running = undefined));
      },
      Math.max(50, this.o.ttlMs / 3),
    );
    this.timer.unref();
  }

  beat(): Promise<number> {
    return this.cmd.tgwBeat(this.live, this.dead, this.member, Math.round(this.o.ttlMs));
  }

  /** Clean up after gateways past their expiry; see the header. */
  async reap(limit = 20): Promise<ReapedGateways> {
    const flat = await this.cmd.tgwClaimDead(this.live, this.dead, Math.round(this.o.ttlMs), limit);
    const bar = flat.indexOf('|');
    const claimed = flat.slice(0, bar);
    const liveNs = new Set(flat.slice(bar + 1).map((m) => parseMember(m).leaseNamespace));
    const out: ReapedGateways = { gateways: [], leaseNamespaces: [], leaseRecords: 0 };
    for (const m of claimed) {
      const { ownerId, leaseNamespace } = parseMember(m);
      if (!(await this.dropConsumer(ownerId))) continue; // still holds jobs: the claim lapses, a later pass retries
      if (leaseNamespace && !liveNs.has(leaseNamespace)) {
        out.leaseRecords += await this.cmd.tgwDropLeases(`${leaseNamespace}:leases`, leaseNamespace);
        out.leaseNamespaces.push(leaseNamespace);
        liveNs.add(leaseNamespace); // another dead gateway of the same host finds nothing left
      }
      await this.redis.zrem(this.dead, m);
      out.gateways.push(ownerId);
      this.reapedTotal++;
      log.info(`presence: cleaned up after dead gateway ${ownerId} (${leaseNamespace || 'no lease namespace'})`);
    }
    return out;
  }

  /** Delete the job consumer of a dead gateway when it holds no pending entries; true when gone. */
  private async dropConsumer(consumer: string): Promise<boolean> {
    let pending: unknown[];
    try {
      pending = (await this.redis.call('XPENDING', this.stream, 'runners', '-', '+', 1, consumer)) as unknown[];
    } catch (e) {
      if (/NOGROUP|no such key/i.test((e as Error).message)) return true; // no job queue yet
      throw e;
    }
    if (pending.length) {
      trace(`dead gateway ${consumer} still holds pending jobs; waiting for them to be claimed`);
      return false;
    }
    await this.redis.call('XGROUP', 'DELCONSUMER', this.stream, 'runners', consumer);
    return true;
  }

  /**
   * Graceful stop (after the job runner has stopped): deregister at once:
   * delete this gateway's job consumer and its presence member. If the runner
   * left jobs pending (its drain timed out), deleting the consumer would drop
   * them, so the member is only marked expired instead: the survivors claim
   * the jobs, then reap it as they would a dead gateway.
   */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
    try {
      if (await this.dropConsumer(this.o.ownerId)) {
        await this.redis.multi().zrem(this.live, this.member).zrem(this.dead, this.member).exec();
        log.info(`presence: gateway ${this.o.ownerId} deregistered`);
      } else {
        await this.cmd.tgwBeat(this.live, this.dead, this.member, -1);
      }
    } catch (e) {
      log.warn(`presence: could not deregister (${(e as Error).message}); other gateways will reap this one after ${this.o.ttlMs} ms`);
    }
    this.redis.disconnect();
  }
}
