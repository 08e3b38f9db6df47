// Bundles in Redis, shared by every gateway replica: `<ns>:deploy:bundles`
// (hash version -> functions JSON) and `<ns>:deploy:history` (list of
// activations, the last one active). Each change is one Lua script, so a
// put / rollback is atomic across replicas, and the script PUBLISHes the new
// active version on `<ns>:deploy:events`; replicas subscribed there switch
// within a second. A slow poll (pollMs) covers notices missed while a
// subscriber was disconnected, and finds a store that lost its data (no
// activation at all), which the deployer then re-seeds (restore()).
//
// Ownership: owns a command connection, a subscriber connection and the poll
// timer. Event loop only.
import { Redis } from 'ioredis';
import {
  BundleVersionConflict,
  HISTORY_LIMIT,
  bundleJson,
  type BundleSnapshot,
  type BundleStore,
  type VersionedBundle,
} from './bundle-store.ts';

// KEYS = bundles, history; ARGV = version, json, limit, channel, onlyIfEmpty. Returns 'ok' | 'conflict' | 'kept'.
const PUT = `
if ARGV[5] == '1' and redis.call('LLEN', KEYS[2]) > 0 then return 'kept' end
local prev = redis.call('HGET', KEYS[1], ARGV[1])
if prev and prev ~= ARGV[2] then return 'conflict' end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if redis.call('LINDEX', KEYS[2], -1) ~= ARGV[1] then redis.call('RPUSH', KEYS[2], ARGV[1]) end
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[3]), -1)
redis.call('PUBLISH', ARGV[4], ARGV[1])
return 'ok'`;

// KEYS = bundles, history; ARGV = channel. Returns {version, json} or {} when there is nothing to go back to.
const ROLLBACK = `
if redis.call('LLEN', KEYS[2]) < 2 then return {} end
redis.call('RPOP', KEYS[2])
local v = redis.call('LINDEX', KEYS[2], -1)
redis.call('PUBLISH', ARGV[1], v)
return {v, redis.call('HGET', KEYS[1], v)}`;

// KEYS = bundles, history. Returns {version, json} or {}.
const ACTIVE = `
local v = redis.call('LINDEX', KEYS[2], -1)
if not v then return {} end
return {v, redis.call('HGET', KEYS[1], v)}`;

// KEYS = bundles, history. Returns {version, json, version, json, ...} oldest first (json '' if missing).
const SNAPSHOT = `
local out = {}
for _, v in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
  out[#out + 1] = v
  out[#out + 1] = redis.call('HGET', KEYS[1], v) or ''
end
return out`;

// KEYS = bundles, history; ARGV = channel, then version, json pairs oldest first.
// Writes them only if no activation is stored (the store lost its data). Returns 1 when written.
const RESTORE = `
if redis.call('LLEN', KEYS[2]) > 0 then return 0 end
for i = 2, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  redis.call('RPUSH', KEYS[2], ARGV[i])
end
redis.call('PUBLISH', ARGV[1], ARGV[#ARGV - 1])
return 1`;

interface Scripts {
  tgwBundlePut(bundles: string, history: string, ...argv: string[]): Promise<string>;
  tgwBundleRollback(bundles: string, history: string, channel: string): Promise<string[]>;
  tgwBundleActive(bundles: string, history: string): Promise<string[]>;
  tgwBundleSnapshot(bundles: string, history: string): Promise<string[]>;
  tgwBundleRestore(bundles: string, history: string, channel: string, ...pairs: string[]): Promise<number>;
}

export interface RedisBundleStoreOptions {
  namespace?: string;
  /** Fallback poll of the active version (ms). */
  pollMs?: number;
}

const decode = (r: string[]): VersionedBundle | null => (r.length === 2 && r[1] ? { version: r[0]!, functions: JSON.parse(r[1]) } : null);

export class RedisBundleStore implements BundleStore {
  readonly kind = 'redis' as const;
  private readonly redis: Redis;
  private sub: Redis | undefined;
  private readonly keys: [string, string];
  private readonly channel: string;
  private poll: NodeJS.Timeout | undefined;
  private readonly pollMs: number;

  constructor(
    private readonly url: string,
    opts: RedisBundleStoreOptions = {},
  ) {
    const ns = opts.namespace ?? 'tgw';
    this.keys = [`${ns}:deploy:bundles`, `${ns}:deploy:history`];
    this.channel = `${ns}:deploy:events`;
    this.pollMs = opts.pollMs ?? 5000;
    this.redis = new Redis(url, {
      connectTimeout: 2000,
      maxRetriesPerRequest: 1,
      commandTimeout: 2000,
      retryStrategy: (n) => Math.min(100 * n, 1000),
    });
    this.redis.on('error', () => undefined); // ioredis reconnects; failures surface through the commands that fail (DEPLOY_UNAVAILABLE)
    this.redis.defineCommand('tgwBundlePut', { numberOfKeys: 2, lua: PUT });
    this.redis.defineCommand('tgwBundleRollback', { numberOfKeys: 2, lua: ROLLBACK });
    this.redis.defineCommand('tgwBundleActive', { numberOfKeys: 2, lua: ACTIVE });
    this.redis.defineCommand('tgwBundleSnapshot', { numberOfKeys: 2, lua: SNAPSHOT });
    this.redis.defineCommand('tgwBundleRestore', { numberOfKeys: 2, lua: RESTORE });
  }

  private get cmd(): Scripts {
    return this.redis as unknown as Scripts;
  }

  async active(): Promise<VersionedBundle | null> {
    return decode(await this.cmd.tgwBundleActive(...this.keys));
  }

  async history(): Promise<string[]> {
    return this.redis.lrange(this.keys[1], 0, -1);
  }

  async put(b: VersionedBundle): Promise<void> {
    const r = await this.cmd.tgwBundlePut(...this.keys, b.version, bundleJson(b), String(HISTORY_LIMIT), this.channel, '0');
    if (r === 'conflict') throw new BundleVersionConflict(b.version);
  }

  async initialize(b: VersionedBundle): Promise<VersionedBundle> {
    const r = await this.cmd.tgwBundlePut(...this.keys, b.version, bundleJson(b), String(HISTORY_LIMIT), this.channel, '1');
    if (r === 'conflict') throw new BundleVersionConflict(b.version);
    return (await this.active())!;
  }

  async snapshot(): Promise<BundleSnapshot> {
    const flat = await this.cmd.tgwBundleSnapshot(...this.keys);
    const out: BundleSnapshot = { history: [], bundles: {} };
    for (let i = 0; i + 1 < flat.length; i += 2) {
      if (!flat[i + 1]) continue; // a version whose bundle is gone cannot be restored
      out.history.push(flat[i]!);
      out.bundles[flat[i]!] = JSON.parse(flat[i + 1]!);
    }
    return out;
  }

  async restore(s: BundleSnapshot): Promise<boolean> {
    const pairs = s.history.slice(-HISTORY_LIMIT).flatMap((v) => [v, JSON.stringify(s.bundles[v])]);
    if (!pairs.length) return false;
    return (await this.cmd.tgwBundleRestore(...this.keys, this.channel, ...pairs)) === 1;
  }

  async rollback(): Promise<VersionedBundle | null> {
    return decode(await this.cmd.tgwBundleRollback(...this.keys, this.channel));
  }

  watch(onChange: (version: string | null) => void): void {
    if (!this.sub) {
      this.sub = new Redis(this.url, { connectTimeout: 2000, retryStrategy: (n) => Math.min(100 * n, 1000) });
      // A lost subscription is covered by the poll below, which reads the same list head every pollMs.
      this.sub.on('error', () => undefined);
      this.sub.subscribe(this.channel).catch(() => undefined); // see above: the poll covers it
    }
    this.sub.on('message', (ch: string, v: string) => {
      if (ch === this.channel) onChange(v);
    });
    // The deployer ignores a version it already has, so the poll can report every time;
    // null (no activation at all) tells it the store lost its data. A reconnect checks at once.
    const check = () => {
      this.redis
        .lindex(this.keys[1], -1)
        .then((v) => onChange(v))
        .catch(() => undefined); // Redis away: the next tick asks again
    };
    this.poll = setInterval(check, this.pollMs);
    this.poll.unref();
    this.redis.on('ready', check);
  }

  async close(): Promise<void> {
    if (this.poll) clearInterval(this.poll);
    this.sub?.disconnect();
    this.redis.disconnect();
  }
}
