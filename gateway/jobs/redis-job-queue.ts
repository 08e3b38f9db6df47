// JobQueue in Redis, shared by every gateway replica. The work queue is one
// Redis Stream `<ns>:jobs:stream` with consumer group `runners`: XADD when a
// job is accepted, XREADGROUP to take it (it then sits in the consumer's
// pending list), XACK + XDEL when it is finished. A runner that dies leaves
// its entries pending; XAUTOCLAIM lets any live runner take entries idle for
// longer than the claim time, and live runners reset the idle time of what
// they hold (XCLAIM ... JUSTID) as a heartbeat. Job records are hashes
// `<ns>:job:<id>` {rev, state, doc} with a TTL equal to the job's retention,
// updated by one Lua compare-and-set on rev. The sorted set `<ns>:jobs:recent`
// (ids by creation time, trimmed to RECENT_KEEP) lets the console list them.
//
// Ownership: owns two ioredis connections (one for commands, one for the
// blocking XREADGROUP). Event loop only. At-least-once: a runner paused
// longer than the claim time may see its job re-run elsewhere.
import { Redis } from 'ioredis';
import type { JobQueue, Taken } from './job-queue.ts';
import { newJobRecord, nextRecord, type JobRecord, type JobState, type NewJob } from './job-state.ts';
import { gatewayLog as log } from '../../common/logger.ts';

// KEYS[1] = job hash; ARGV = expected rev, new rev, state, doc, ttl ms. Returns 1, or 0 when rev moved.
const CAS = `
if redis.call('HGET', KEYS[1], 'rev') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'rev', ARGV[2], 'state', ARGV[3], 'doc', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1`;

// Accept one job atomically, (re)creating the stream and group first: after
// Redis restarts empty a bare XADD would make a stream with no group, and the
// job would be accepted but never run. KEYS = job hash, stream; ARGV = group,
// id, rev, state, doc, ttl ms. Returns 1 when the group had to be created.
const ENQUEUE = `
local created = 1
local r = redis.pcall('XGROUP', 'CREATE', KEYS[2], ARGV[1], '0', 'MKSTREAM')
if type(r) == 'table' and r.err then
  if string.sub(r.err, 1, 9) ~= 'BUSYGROUP' then return redis.error_reply(r.err) end
  created = 0
end
redis.call('HSET', KEYS[1], 'rev', ARGV[3], 'state', ARGV[4], 'doc', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
redis.call('XADD', KEYS[2], '*', 'id', ARGV[2])
return created`;

// Give a pending entry back (a retryable failure): a new entry for the same job
// id at the stream's end, the old one acknowledged and deleted, in one step.
// Nothing happens when the entry is no longer pending here (another runner
// claimed it, or Redis lost it). KEYS = stream; ARGV = group, entry. Returns 1
// when re-queued.
const REQUEUE = `
local e = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])
if #e == 0 then return 0 end
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('XADD', KEYS[1], '*', unpack(e[1][2]))
return 1`;

/** True for Redis's NOGROUP error kind (stream or group missing: Redis lost its data). */
export function isNoGroup(e: unknown): boolean {
  return e instanceof Error && e.message.startsWith('NOGROUP');
}

export interface RedisJobQueueOptions {
  /** Key namespace shared by all replicas (default `tgw`). */
  namespace?: string;
  /** Per-command timeout of the command connection (ms). */
  commandTimeoutMs?: number;
}

/** Ids kept in the recent-jobs index (records past their retention drop out when read). */
const RECENT_KEEP = 500;

type Entries = Array<[string, string[]]>;

function takenOf(entries: Entries | null | undefined): Taken[] {
  const out: Taken[] = [];
  for (const [entry, fields] of entries ?? []) {
    if (!fields) continue; // deleted while pending
    const i = fields.indexOf('id');
    if (i >= 0) out.push({ id: fields[i + 1]!, entry });
  }
  return out;
}

export class RedisJobQueue implements JobQueue {
  readonly kind = 'redis' as const;
  private readonly redis: Redis;
  private readonly blocking: Redis;
  private readonly ns: string;
  private readonly stream: string;
  private readonly group = 'runners';
  private groupReady: Promise<void> | undefined;
  private claimCursor = '0-0';

  constructor(url: string, opts: RedisJobQueueOptions = {}) {
    this.ns = opts.namespace ?? 'tgw';
    this.stream = `${this.ns}:jobs:stream`;
    const common = { connectTimeout: 2000, retryStrategy: (n: number) => Math.min(100 * n, 1000) };
    this.redis = new Redis(url, { ...common, maxRetriesPerRequest: 1, commandTimeout: opts.commandTimeoutMs ?? 2000 });
    this.blocking = new Redis(url, { ...common, maxRetriesPerRequest: 1 });
    this.redis.defineCommand('tgwJobCas', { numberOfKeys: 1, lua: CAS });
    this.redis.defineCommand('tgwJobEnqueue', { numberOfKeys: 2, lua: ENQUEUE });
    this.redis.defineCommand('tgwJobRequeue', { numberOfKeys: 1, lua: REQUEUE });
    for (const c of [this.redis, this.blocking]) c.on('error', () => undefined); // state is seen through failed commands
  }

  private get recentKey(): string {
    return `${this.ns}:jobs:recent`;
  }

  private key(id: string): string {
    return `${this.ns}:job:${id}`;
  }

  /** Create the stream and group once (BUSYGROUP = another replica did). */
  private ensureGroup(): Promise<void> {
    this.groupReady ??= this.redis.call('XGROUP', 'CREATE', this.stream, this.group, '0', 'MKSTREAM').then(
      () => undefined,
      (e: Error) => {
        if (!/BUSYGROUP/.test(e.message)) {
          this.groupReady = undefined;
          throw e;
        }
      },
    );
    return this.groupReady;
  }

  async enqueue(job: NewJob): Promise<JobRecord> {
    const rec = newJobRecord(job, Date.now());
    const enq = (this.redis as unknown as { tgwJobEnqueue(...a: Array<string | number>): Promise<number> }).tgwJobEnqueue;
    const created = await enq.call(
      this.redis,
      this.key(rec.id),
      this.stream,
      this.group,
      rec.id,
      String(rec.rev),
      rec.state,
      JSON.stringify(rec),
      rec.retentionMs,
    );
    if (created === 1 && this.groupReady)
      log.warn(`job queue: stream '${this.stream}' or group '${this.group}' was gone (Redis lost its data?); recreated`);
    this.groupReady ??= Promise.resolve();
    // The console's recent-jobs index (best effort: a lost entry only hides the job from the list).
    // The job is already queued: a failure here must not turn its 202 into an error.
    await this.redis
      .multi()
      .zadd(this.recentKey, rec.createdAt, rec.id)
      .zremrangebyrank(this.recentKey, 0, -RECENT_KEEP - 1)
      .exec()
      // best effort (above): a lost index entry only hides the job from the console's list
      .catch(() => undefined);
    return rec;
  }

  /**
   * Run a group command; on NOGROUP (Redis restarted empty, or the stream was
   * deleted) recreate the stream and group, log it, and run it once more.
   */
  private async withGroup<T>(fn: () => Promise<T>): Promise<T> {
    await this.ensureGroup();
    try {
      return await fn();
    } catch (e) {
      if (!isNoGroup(e)) throw e;
      log.warn(`job queue: stream '${this.stream}' or group '${this.group}' is gone (Redis lost its data?); recreating it`);
      this.groupReady = undefined;
      this.claimCursor = '0-0';
      await this.ensureGroup();
      return fn();
    }
  }

  async get(id: string): Promise<JobRecord | null> {
    const doc = await this.redis.hget(this.key(id), 'doc');
    return doc ? (JSON.parse(doc) as JobRecord) : null;
  }

  async update(rec: JobRecord, to: JobState | null, patch: Partial<JobRecord> = {}): Promise<JobRecord | null> {
    const next = nextRecord(rec, to, patch, Date.now());
    const cas = (this.redis as unknown as { tgwJobCas(...a: Array<string | number>): Promise<number> }).tgwJobCas;
    const ok = await cas.call(
      this.redis,
      this.key(rec.id),
      String(rec.rev),
      String(next.rev),
      next.state,
      JSON.stringify(next),
      next.retentionMs,
    );
    return ok === 1 ? next : null;
  }

  async take(consumer: string, max: number, waitMs: number): Promise<Taken[]> {
    const args: Array<string | number> = ['GROUP', this.group, consumer, 'COUNT', max];
    if (waitMs > 0) args.push('BLOCK', Math.max(1, Math.round(waitMs)));
    const res = (await this.withGroup(() => this.blocking.call('XREADGROUP', ...args, 'STREAMS', this.stream, '>'))) as unknown[] | null;
    if (!res?.length) return [];
    // RESP2 answers [[stream, entries]]; RESP3 (a map) comes back as [stream, entries].
    return takenOf((typeof res[0] === 'string' ? res[1] : (res[0] as [string, Entries])[1]) as Entries);
  }

  async reclaim(consumer: string, minIdleMs: number, max: number): Promise<Taken[]> {
    const res = (await this.withGroup(() =>
      this.redis.call('XAUTOCLAIM', this.stream, this.group, consumer, Math.round(minIdleMs), this.claimCursor, 'COUNT', max),
    )) as [string, Entries, string[]?];
    this.claimCursor = res[0] ?? '0-0';
    return takenOf(res[1]);
  }

  async touch(consumer: string, entries: string[]): Promise<void> {
    if (!entries.length) return;
    await this.withGroup(() => this.redis.call('XCLAIM', this.stream, this.group, consumer, 0, ...entries, 'JUSTID'));
  }

  /**
   * After delayMs (the caller still holds the entry, so its heartbeat keeps it from being claimed), put the job
   * at the stream's end for any runner: a retry after a 503 runs in about delayMs, not after the claim time.
   * Should this process die meanwhile, the entry stays pending and XAUTOCLAIM recovers it as before.
   */
  async release(entry: string, delayMs: number): Promise<void> {
    if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
    const rq = (this.redis as unknown as { tgwJobRequeue(...a: string[]): Promise<number> }).tgwJobRequeue;
    await this.withGroup(() => rq.call(this.redis, this.stream, this.group, entry));
  }

  async ack(entry: string): Promise<void> {
    await this.redis.multi().xack(this.stream, this.group, entry).xdel(this.stream, entry).exec();
  }

  /** Entries taken but not acknowledged, in the whole group (for tests and diagnostics). */
  async pendingCount(): Promise<number> {
    const r = (await this.withGroup(() => this.redis.call('XPENDING', this.stream, this.group))) as [number, ...unknown[]];
    return Number(r[0]);
  }

  async recent(limit: number): Promise<JobRecord[]> {
    const ids = await this.redis.zrevrange(this.recentKey, 0, Math.max(0, limit * 2 - 1));
    if (!ids.length) return [];
    const p = this.redis.pipeline();
    for (const id of ids) p.hget(this.key(id), 'doc');
    const res = (await p.exec()) ?? [];
    const out: JobRecord[] = [];
    const gone: string[] = [];
    res.forEach(([err, doc], i) => {
      if (err) return;
      if (doc) out.push(JSON.parse(doc as string) as JobRecord);
      else gone.push(ids[i]!);
    });
    if (gone.length) await this.redis.zrem(this.recentKey, ...gone); // past retention
    return out.slice(0, limit);
  }

  async close(): Promise<void> {
    this.redis.disconnect();
    this.blocking.disconnect();
  }
}
