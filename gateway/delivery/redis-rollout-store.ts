// Rollouts in Redis, shared by every gateway replica:
//   <ns>:rollout:rec:<id>               the record (JSON)
//   <ns>:rollout:active                 hash function -> id of its running rollout
//   <ns>:rollout:done                   list of finished ids, newest first
//   <ns>:rollout:stat:<id>:<step>:<side> hash c (calls), e (errors), <bucket> -> calls
//   <ns>:rollout:lock:<fn>              the judge's lock (SET NX PX)
// Creating and finishing are Lua scripts, so "one rollout per function" holds
// across replicas. Ownership: one command connection. Event loop only.
import { Redis } from 'ioredis';
import { DONE_LIMIT, type RolloutStore, type StatDelta } from './rollout-store.ts';
import type { RolloutRecord } from './rollout-spec.ts';

// KEYS = active, rec; ARGV = function, id, json. 1 = created, 0 = the function has a running rollout.
const CREATE = `
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('SET', KEYS[2], ARGV[3])
return 1`;

// KEYS = active, rec, done; ARGV = function, id, json, finished (1/0), limit.
const SAVE = `
redis.call('SET', KEYS[2], ARGV[3])
if ARGV[4] == '1' and redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('LPUSH', KEYS[3], ARGV[2])
  redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[5]) - 1)
end
return 1`;

// KEYS = lock; ARGV = owner, ttl. 1 when owner holds it now.
const LOCK = `
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[2]))
return 1`;

interface Scripts {
  tgwRolloutCreate(active: string, rec: string, fn: string, id: string, json: string): Promise<number>;
  tgwRolloutSave(
    active: string,
    rec: string,
    done: string,
    fn: string,
    id: string,
    json: string,
    finished: string,
    limit: number,
  ): Promise<number>;
  tgwRolloutLock(lock: string, owner: string, ttl: number): Promise<number>;
}

/** Stats keys expire a week after their last write. */
const STAT_TTL_S = 7 * 24 * 3600;

export class RedisRolloutStore implements RolloutStore {
  readonly kind = 'redis' as const;
  private readonly r: Redis & Scripts;
  private readonly ns: string;

  constructor(url: string, o: { namespace?: string } = {}) {
    this.ns = `${o.namespace ?? 'tgw'}:rollout`;
    this.r = new Redis(url, { lazyConnect: false, maxRetriesPerRequest: 2, enableOfflineQueue: true }) as Redis & Scripts;
    this.r.on('error', () => undefined); // commands fail with their own errors; the connection retries by itself
    this.r.defineCommand('tgwRolloutCreate', { numberOfKeys: 2, lua: CREATE });
    this.r.defineCommand('tgwRolloutSave', { numberOfKeys: 3, lua: SAVE });
    this.r.defineCommand('tgwRolloutLock', { numberOfKeys: 1, lua: LOCK });
  }

  private rec(id: string) {
    return `${this.ns}:rec:${id}`;
  }

  async create(r: RolloutRecord): Promise<boolean> {
    return (await this.r.tgwRolloutCreate(`${this.ns}:active`, this.rec(r.id), r.function, r.id, JSON.stringify(r))) === 1;
  }

  async save(r: RolloutRecord): Promise<void> {
    await this.r.tgwRolloutSave(
      `${this.ns}:active`,
      this.rec(r.id),
      `${this.ns}:done`,
      r.function,
      r.id,
      JSON.stringify(r),
      r.state === 'running' ? '0' : '1',
      DONE_LIMIT,
    );
  }

  async active(): Promise<RolloutRecord[]> {
    const ids = Object.values(await this.r.hgetall(`${this.ns}:active`));
    return this.many(ids);
  }

  async byId(id: string): Promise<RolloutRecord | null> {
    const s = await this.r.get(this.rec(id));
    return s ? (JSON.parse(s) as RolloutRecord) : null;
  }

  async done(): Promise<RolloutRecord[]> {
    return this.many(await this.r.lrange(`${this.ns}:done`, 0, -1));
  }

  private async many(ids: string[]): Promise<RolloutRecord[]> {
    if (!ids.length) return [];
    const vals = await this.r.mget(ids.map((id) => this.rec(id)));
    return vals.filter((v): v is string => !!v).map((v) => JSON.parse(v) as RolloutRecord);
  }

  async addStats(id: string, step: number, side: string, d: StatDelta): Promise<void> {
    const k = `${this.ns}:stat:${id}:${step}:${side}`;
    const p = this.r.pipeline();
    if (d.calls) p.hincrby(k, 'c', d.calls);
    if (d.errors) p.hincrby(k, 'e', d.errors);
    if (d.diffMicro) p.hincrby(k, 'd', Math.round(d.diffMicro));
    if (d.mismatches) p.hincrby(k, 'm', d.mismatches);
    for (const [i, n] of d.buckets) p.hincrby(k, String(i), n);
    p.expire(k, STAT_TTL_S);
    await p.exec();
  }

  async readStats(id: string, step: number, side: string): Promise<StatDelta> {
    const h = await this.r.hgetall(`${this.ns}:stat:${id}:${step}:${side}`);
    const d: StatDelta = {
      calls: Number(h.c ?? 0),
      errors: Number(h.e ?? 0),
      buckets: new Map(),
      diffMicro: Number(h.d ?? 0),
      mismatches: Number(h.m ?? 0),
    };
    for (const [f, v] of Object.entries(h)) if (/^\d+$/.test(f)) d.buckets.set(Number(f), Number(v));
    return d;
  }

  async lock(fn: string, owner: string, ttlMs: number): Promise<boolean> {
    return (await this.r.tgwRolloutLock(`${this.ns}:lock:${fn}`, owner, ttlMs)) === 1;
  }

  async close(): Promise<void> {
    await this.r.quit().catch(() => this.r.disconnect());
  }
}
