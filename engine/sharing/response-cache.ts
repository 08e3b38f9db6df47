// The response cache stores (Triton's cache API: a local in-process cache and
// a Redis cache, picked by --cache-config). Both map a request hash to the
// encoded response. A store never throws into the request path: a failed
// lookup is a miss, a failed insert is dropped (Redis down = every request
// runs the model). Main thread only.
import { createRequire } from 'node:module';
import type { Redis } from 'ioredis';
import { log } from '../../common/logger.ts';
import type { CacheStoreStats } from '../api/sharing-status.ts';

// Importers keep reading the store counters' type from here.
export type { CacheStoreStats } from '../api/sharing-status.ts';

export interface ResponseCacheStore {
  readonly kind: 'local' | 'redis';
  get(key: string): Promise<Uint8Array | undefined>;
  set(key: string, value: Uint8Array): Promise<void>;
  /** Drop an entry that get() returned but that does not fit its model: deleted, and that lookup counted as a miss. */
  discard(key: string): Promise<void>;
  stats(): CacheStoreStats;
  close(): Promise<void>;
}

export type CacheConfig =
  | { kind: 'local'; size: number }
  | { kind: 'redis'; host: string; port: number; password?: string; db?: number; ttlMs?: number; prefix?: string };

/**
 * How long a Redis entry lives unless `ttl_ms` says otherwise (0: no expiry).
 * Entries of versions that were reloaded are never asked for again; without
 * an expiry they would stay until Redis's own eviction, if it has any.
 */
export const DEFAULT_REDIS_TTL_MS = 3_600_000;

/**
 * Parse `--cache-config` values: Triton's `local,size=<bytes>` and
 * `redis,host=H,port=P[,password=..][,db=N][,ttl_ms=N][,prefix=..]` (ttl_ms
 * defaults to DEFAULT_REDIS_TTL_MS; 0 keeps entries until Redis evicts them).
 * Several values for one cache (Triton's repeated `--cache-config
 * redis,host=..` `--cache-config redis,port=..`) merge.
 */
export function parseCacheConfig(values: string[]): CacheConfig | undefined {
  if (!values.length) return undefined;
  let kind: string | undefined;
  const kv: Record<string, string> = {};
  for (const v of values) {
    const [k, ...rest] = v.split(',');
    if (kind && k !== kind) throw new Error(`--cache-config: one cache at a time, got '${kind}' and '${k}'`);
    kind = k;
    for (const p of rest) {
      const i = p.indexOf('=');
      if (i <= 0) throw new Error(`--cache-config: expected key=value, got '${p}'`);
      kv[p.slice(0, i)] = p.slice(i + 1);
    }
  }
  const num = (k: string, dflt?: number): number | undefined => {
    if (kv[k] === undefined) return dflt;
    const n = Number(kv[k]);
    if (!Number.isInteger(n) || n < 0) throw new Error(`--cache-config: ${k} must be a non-negative integer, got '${kv[k]}'`);
    return n;
  };
  if (kind === 'local') {
    const size = num('size');
    if (!size) throw new Error('--cache-config local needs size=<bytes> above 0');
    return { kind: 'local', size };
  }
  if (kind === 'redis') {
    return {
      kind: 'redis',
      host: kv.host ?? '127.0.0.1',
      port: num('port', 6379)!,
      password: kv.password,
      db: num('db'),
      ttlMs: num('ttl_ms', DEFAULT_REDIS_TTL_MS),
      prefix: kv.prefix,
    };
  }
  throw new Error(`--cache-config: unknown cache '${kind}' (local or redis)`);
}

/** An LRU bounded by total bytes (keys + values); an entry larger than the whole cache is not kept. */
export class LocalResponseCache implements ResponseCacheStore {
  readonly kind = 'local' as const;
  /** Map order is recency order: first = least recently used. */
  private readonly entries = new Map<string, Uint8Array>();
  private bytes = 0;
  private readonly counts = { lookups: 0, hits: 0, misses: 0, evictions: 0 };

  constructor(readonly capacity: number) {}

  private static cost(key: string, value: Uint8Array): number {
    return key.length + value.byteLength;
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    this.counts.lookups++;
    const v = this.entries.get(key);
    if (!v) {
      this.counts.misses++;
      return undefined;
    }
    this.counts.hits++;
    this.entries.delete(key);
    this.entries.set(key, v);
    return v;
  }

  async set(key: string, value: Uint8Array): Promise<void> {
    const cost = LocalResponseCache.cost(key, value);
    if (cost > this.capacity) return;
    const old = this.entries.get(key);
    if (old) {
      this.entries.delete(key);
      this.bytes -= LocalResponseCache.cost(key, old);
    }
    for (const [k, v] of this.entries) {
      if (this.bytes + cost <= this.capacity) break;
      this.entries.delete(k);
      this.bytes -= LocalResponseCache.cost(k, v);
      this.counts.evictions++;
    }
    this.entries.set(key, value);
    this.bytes += cost;
  }

  async discard(key: string): Promise<void> {
    const v = this.entries.get(key);
    if (v) {
      this.entries.delete(key);
      this.bytes -= LocalResponseCache.cost(key, v);
    }
    this.counts.hits--;
    this.counts.misses++;
  }

  stats(): CacheStoreStats {
    return { entries: this.entries.size, bytes: this.bytes, capacity: this.capacity, ...this.counts };
  }

  async close(): Promise<void> {
    this.entries.clear();
    this.bytes = 0;
  }
}

/** Entries in Redis under `<prefix><hash>`, shared by every engine on that Redis; eviction is Redis's own (maxmemory). */
export class RedisResponseCache implements ResponseCacheStore {
  readonly kind = 'redis' as const;
  private readonly redis: Redis;
  private readonly prefix: string;
  private readonly counts = { lookups: 0, hits: 0, misses: 0, evictions: 0 };
  private warned = false;

  constructor(private readonly cfg: Extract<CacheConfig, { kind: 'redis' }>) {
    this.prefix = cfg.prefix ?? 'tritonish:cache:';
    // No offline queue and a short command timeout: while Redis is away a lookup fails at once (a miss).
    // ioredis (~20 MiB resident) is loaded only when a Redis cache is configured.
    const { Redis: RedisClient } = createRequire(import.meta.url)('ioredis') as typeof import('ioredis');
    this.redis = new RedisClient({
      host: cfg.host,
      port: cfg.port,
      password: cfg.password,
      db: cfg.db,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: 250,
      connectTimeout: 1000,
      retryStrategy: (n) => Math.min(100 * n, 2000),
    });
    this.redis.on('error', (err: Error) => {
      if (!this.warned) log.warn(`response cache: redis ${cfg.host}:${cfg.port} unreachable, serving misses: ${err.message}`);
      this.warned = true;
    });
    this.redis.on('ready', () => (this.warned = false));
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    this.counts.lookups++;
    try {
      const v = await this.redis.getBuffer(this.prefix + key);
      if (v) {
        this.counts.hits++;
        return v;
      }
    } catch {
      // unreachable or slow: a miss
    }
    this.counts.misses++;
    return undefined;
  }

  async set(key: string, value: Uint8Array): Promise<void> {
    try {
      const buf = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
      const ttl = this.cfg.ttlMs ?? DEFAULT_REDIS_TTL_MS;
      if (ttl > 0) await this.redis.set(this.prefix + key, buf, 'PX', ttl);
      else await this.redis.set(this.prefix + key, buf);
    } catch {
      // dropped: the next request computes it again
    }
  }

  async discard(key: string): Promise<void> {
    this.counts.hits--;
    this.counts.misses++;
    try {
      await this.redis.del(this.prefix + key);
    } catch {
      // unreachable: the fresh answer's set() replaces it, or it expires
    }
  }

  stats(): CacheStoreStats {
    return { entries: 0, bytes: 0, capacity: 0, ...this.counts };
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }
}

/** The store a parsed --cache-config names. */
export function createResponseCache(cfg: CacheConfig): ResponseCacheStore {
  return cfg.kind === 'local' ? new LocalResponseCache(cfg.size) : new RedisResponseCache(cfg);
}
