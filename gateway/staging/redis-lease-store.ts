// Lease store in Redis, shared by every gateway of one host (scope). Each
// lease is a hash `<ns>:lease:<region>` {owner, key, expiresAt} indexed by a
// sorted set `<ns>:leases` scored by expiry. Every change is one Lua script,
// so renew / release / claim are atomic, and expiry is judged by the Redis
// server's clock (TIME), not by the gateways' clocks. Records of a dead owner
// stay until a reaper claims and releases them, which is how reapers find them.
//
// Ownership: owns one ioredis connection. Commands fail fast while Redis is
// unreachable (no offline queue); ioredis reconnects in the background and
// 'state' events report the transitions. Event loop only.
import { EventEmitter } from 'node:events';
import { Redis } from 'ioredis';
import type { Lease, LeaseStore, LeaseStoreState } from './lease-store.ts';
import { gatewayLog as log } from '../../common/logger.ts';

const NOW = `local t = redis.call('TIME'); local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;

// KEYS[1] = index zset; ARGV = ns, owner, ttl, region1, key1, region2, key2, ...
const RENEW = `${NOW}
local held = {}
local exp = now + tonumber(ARGV[3])
for i = 4, #ARGV, 2 do
  local h = ARGV[1] .. ':lease:' .. ARGV[i]
  local cur = redis.call('HGET', h, 'owner')
  if (not cur) or cur == ARGV[2] then
    redis.call('HSET', h, 'owner', ARGV[2], 'key', ARGV[i + 1], 'expiresAt', exp)
    redis.call('ZADD', KEYS[1], exp, ARGV[i])
    held[#held + 1] = ARGV[i]
  end
end
return held`;

// KEYS[1] = index; ARGV = ns, owner, region...
const RELEASE = `
local n = 0
for i = 3, #ARGV do
  local h = ARGV[1] .. ':lease:' .. ARGV[i]
  if redis.call('HGET', h, 'owner') == ARGV[2] then
    redis.call('DEL', h)
    redis.call('ZREM', KEYS[1], ARGV[i])
    n = n + 1
  end
end
return n`;

// KEYS[1] = index; ARGV = ns, claimer, claimTtl, limit. Returns flat [region, key, prevOwner, prevExpiresAt]*.
const CLAIM = `${NOW}
local out = {}
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[4]))
for _, region in ipairs(due) do
  local h = ARGV[1] .. ':lease:' .. region
  local f = redis.call('HMGET', h, 'owner', 'key', 'expiresAt')
  if not f[1] then
    redis.call('ZREM', KEYS[1], region)
  elseif f[1] ~= ARGV[2] then
    local exp = now + tonumber(ARGV[3])
    redis.call('HSET', h, 'owner', ARGV[2], 'expiresAt', exp)
    redis.call('ZADD', KEYS[1], exp, region)
    out[#out + 1] = region
    out[#out + 1] = f[2] or ''
    out[#out + 1] = f[1]
    out[#out + 1] = f[3] or '0'
  end
end
return out`;

// KEYS[1] = index; ARGV = ns. Returns flat [region, key, owner, expiresAt]*.
const LIST = `
local out = {}
for _, region in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local f = redis.call('HMGET', ARGV[1] .. ':lease:' .. region, 'owner', 'key', 'expiresAt')
  if f[1] then
    out[#out + 1] = region
    out[#out + 1] = f[2] or ''
    out[#out + 1] = f[1]
    out[#out + 1] = f[3] or '0'
  end
end
return out`;

interface Scripts {
  tgwRenew(index: string, ...args: Array<string | number>): Promise<string[]>;
  tgwRelease(index: string, ...args: string[]): Promise<number>;
  tgwClaim(index: string, ...args: Array<string | number>): Promise<string[]>;
  tgwList(index: string, ns: string): Promise<string[]>;
}

export interface RedisLeaseStoreOptions {
  /** Namespace of the keys; gateways sharing one host's /dev/shm and engine share it. */
  namespace?: string;
  /** Per-command timeout (ms); a hung Redis counts as down. */
  commandTimeoutMs?: number;
}

function leases(flat: string[]): Lease[] {
  const out: Lease[] = [];
  for (let i = 0; i + 3 < flat.length; i += 4) {
    out.push({ region: flat[i]!, key: flat[i + 1]!, owner: flat[i + 2]!, expiresAt: Number(flat[i + 3]) });
  }
  return out;
}

export class RedisLeaseStore extends EventEmitter implements LeaseStore {
  readonly kind = 'redis' as const;
  private readonly redis: Redis;
  private readonly ns: string;
  private readonly index: string;
  private current: LeaseStoreState = 'down';
  private closing = false;

  constructor(url: string, opts: RedisLeaseStoreOptions = {}) {
    super();
    this.ns = opts.namespace ?? 'tgw';
    this.index = `${this.ns}:leases`;
    this.redis = new Redis(url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      commandTimeout: opts.commandTimeoutMs ?? 1000,
      connectTimeout: 2000,
      retryStrategy: (n) => Math.min(100 * n, 1000),
    });
    this.redis.defineCommand('tgwRenew', { numberOfKeys: 1, lua: RENEW });
    this.redis.defineCommand('tgwRelease', { numberOfKeys: 1, lua: RELEASE });
    this.redis.defineCommand('tgwClaim', { numberOfKeys: 1, lua: CLAIM });
    this.redis.defineCommand('tgwList', { numberOfKeys: 1, lua: LIST });
    this.redis.on('ready', () => this.setState('up'));
    this.redis.on('close', () => this.setState('down'));
    this.redis.on('end', () => this.setState('down'));
    this.redis.on('error', (e: Error) => {
      if (this.current === 'up') log.warn(`redis lease store: ${e.message}`);
    });
  }

  get state(): LeaseStoreState {
    return this.current;
  }

  /** Resolve once connected, or reject after timeoutMs. */
  ready(timeoutMs = 5000): Promise<void> {
    if (this.current === 'up') return Promise.resolve();
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => {
        this.off('state', on);
        reject(new Error(`redis not reachable within ${timeoutMs} ms`));
      }, timeoutMs);
      const on = (s: LeaseStoreState) => {
        if (s !== 'up') return;
        clearTimeout(t);
        this.off('state', on);
        resolve();
      };
      this.on('state', on);
    });
  }

  private setState(s: LeaseStoreState): void {
    if (s === this.current) return;
    this.current = s;
    if (this.closing) return;
    if (s === 'down') log.warn('redis lease store is unreachable: staging pauses, calls go inline');
    else log.info('redis lease store is reachable');
    this.emit('state', s);
  }

  private get cmd(): Scripts {
    return this.redis as unknown as Scripts;
  }

  async renew(owner: string, regions: ReadonlyArray<{ region: string; key: string }>, ttlMs: number): Promise<string[]> {
    if (!regions.length) return [];
    const args = regions.flatMap((r) => [r.region, r.key]);
    return this.cmd.tgwRenew(this.index, this.ns, owner, Math.round(ttlMs), ...args);
  }

  async release(owner: string, regions: readonly string[]): Promise<number> {
    if (!regions.length) return 0;
    return this.cmd.tgwRelease(this.index, this.ns, owner, ...regions);
  }

  async claimExpired(claimer: string, claimTtlMs: number, limit = 100): Promise<Lease[]> {
    return leases(await this.cmd.tgwClaim(this.index, this.ns, claimer, Math.round(claimTtlMs), limit));
  }

  async get(region: string): Promise<Lease | null> {
    const f = await this.redis.hmget(`${this.ns}:lease:${region}`, 'owner', 'key', 'expiresAt');
    if (!f[0]) return null;
    return { region, owner: f[0], key: f[1] ?? '', expiresAt: Number(f[2] ?? 0) };
  }

  async list(): Promise<Lease[]> {
    return leases(await this.cmd.tgwList(this.index, this.ns));
  }

  async close(): Promise<void> {
    this.closing = true;
    this.redis.disconnect();
    this.setState('down');
    this.removeAllListeners();
  }
}
