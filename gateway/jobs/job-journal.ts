// A journal of the async jobs this gateway accepted into Redis and has not
// seen finish, so that a Redis that restarts empty (no persistence, a lost
// volume, FLUSHALL) loses none of them: the gateway notices (an epoch marker
// key it set is gone or changed) and puts every journalled job back with its
// original id, record and payload. A JobQueue decorator over RedisJobQueue.
//
// What it keeps: the latest record of each job as this process accepted or
// updated it, in memory, at most `maxEntries` (oldest dropped, and logged),
// each for at most its retention. A job leaves the journal when a final state
// is written through this process, or when a sweep finds it final in Redis
// (another replica ran it). A gateway restart empties the journal: jobs it
// had accepted are then as durable as Redis's own persistence.
//
// Exactly once: a journalled job is put back only if its record is missing
// (Lua: EXISTS, then HSET + XADD). A job in hand here when Redis lost it
// keeps running; its next update finds the record gone and writes it back
// (no queue entry). An update that fails because Redis is down leaves the
// runner giving the job up: the journal keeps the record that update meant
// to write (a call's result included) and puts it back on the queue, so the
// next runner carries on from there (delivers, or runs a job not yet run). A job running on another replica at that moment may run
// again (at least once there, as with a runner that stalls past the claim time).
//
// Ownership: owns the journal map, its timer and one ioredis connection.
// Event loop only.
import { Redis } from 'ioredis';
import type { JobQueue, Taken } from './job-queue.ts';
import { isFinal, nextRecord, type JobRecord, type JobState, type NewJob } from './job-state.ts';
import { gatewayLog as log, tracer } from '../../common/logger.ts';

const trace = tracer('jobs');

// KEYS = job hash, stream; ARGV = group, id, rev, state, doc, ttl ms, requeue (1/0). Returns 1 when written.
const RESTORE = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local r = redis.pcall('XGROUP', 'CREATE', KEYS[2], ARGV[1], '0', 'MKSTREAM')
if type(r) == 'table' and r.err and string.sub(r.err, 1, 9) ~= 'BUSYGROUP' then return redis.error_reply(r.err) end
redis.call('HSET', KEYS[1], 'rev', ARGV[3], 'state', ARGV[4], 'doc', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
if ARGV[7] == '1' then redis.call('XADD', KEYS[2], '*', 'id', ARGV[2]) end
return 1`;

export interface JobJournalOptions {
  namespace?: string;
  /** Jobs kept at most (default 10,000); past it the oldest is dropped. */
  maxEntries?: number;
  /** How often the epoch marker is checked (ms, default 1000). */
  checkMs?: number;
  /** A sweep of the journalled jobs' states in Redis every this many checks (default 10). */
  sweepEvery?: number;
}

export class JobJournal implements JobQueue {
  readonly kind = 'redis' as const;
  private readonly entries = new Map<string, JobRecord>();
  /** Jobs whose last update failed (Redis down): their runner gave them up, so they go back on the queue. */
  private readonly orphans = new Set<string>();
  private readonly redis: Redis;
  private readonly ns: string;
  private readonly max: number;
  private epoch: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private ticks = 0;
  private checking: Promise<void> | undefined;
  /** Jobs put back after Redis came back empty (for tests and the log). */
  restored = 0;
  dropped = 0;

  constructor(
    private readonly inner: JobQueue,
    url: string,
    private readonly o: JobJournalOptions = {},
  ) {
    this.ns = o.namespace ?? 'tgw';
    this.max = o.maxEntries ?? 10_000;
    this.redis = new Redis(url, { connectTimeout: 2000, maxRetriesPerRequest: 1, commandTimeout: 2000, lazyConnect: false });
    this.redis.on('error', () => undefined); // reachability is seen through failed checks, retried every tick
    this.redis.defineCommand('tgwJobRestore', { numberOfKeys: 2, lua: RESTORE });
    this.timer = setInterval(() => void this.check(), o.checkMs ?? 1000);
    this.timer.unref();
  }

  /** Jobs in the journal now. */
  get size(): number {
    return this.entries.size;
  }

  async enqueue(job: NewJob): Promise<JobRecord> {
    if (this.epoch === undefined) await this.check(); // learn the epoch before the first job, so a loss right after it is seen
    const rec = await this.inner.enqueue(job);
    this.keep(rec);
    return rec;
  }

  async update(rec: JobRecord, to: JobState | null, patch?: Partial<JobRecord>): Promise<JobRecord | null> {
    let next: JobRecord | null;
    try {
      next = await this.inner.update(rec, to, patch);
    } catch (e) {
      if (this.entries.has(rec.id)) {
        this.entries.set(rec.id, nextRecord(rec, to, patch ?? {}, Date.now()));
        this.orphans.add(rec.id);
      }
      throw e;
    }
    if (!next && this.entries.has(rec.id) && !(await this.inner.get(rec.id).catch(() => rec))) {
      // Redis lost the record while this process held the job: write back what we hold, then the update.
      if (await this.restore(rec, false)) next = await this.inner.update(rec, to, patch);
    }
    if (next) this.keep(next);
    return next;
  }

  private keep(rec: JobRecord): void {
    this.orphans.delete(rec.id);
    if (isFinal(rec.state, !!rec.callback)) {
      this.entries.delete(rec.id);
      return;
    }
    this.entries.delete(rec.id); // re-insert: the map's order is last-touched
    this.entries.set(rec.id, rec);
    while (this.entries.size > this.max) {
      const oldest = this.entries.keys().next().value!;
      this.entries.delete(oldest);
      this.orphans.delete(oldest);
      if (this.dropped++ % 1000 === 0) log.warn(`job journal full (${this.max}): job ${oldest} no longer covered if Redis loses its data`);
    }
  }

  /** One check: the epoch marker, and now and then the journalled jobs' states. Single flight. */
  check(): Promise<void> {
    this.checking ??= this.checkOnce()
      .catch((e) => trace(`job journal check failed (Redis unreachable?): ${(e as Error).message}`)) // retried next tick
      .finally(() => (this.checking = undefined));
    return this.checking;
  }

  private async checkOnce(): Promise<void> {
    const key = `${this.ns}:jobs:epoch`;
    let seen = await this.redis.get(key);
    if (seen === null) {
      await this.redis.set(key, crypto.randomUUID(), 'NX');
      seen = await this.redis.get(key);
    }
    const before = this.epoch;
    this.epoch = seen ?? undefined;
    if (before !== undefined && seen !== before) await this.recover();
    else if (++this.ticks % (this.o.sweepEvery ?? 10) === 0) await this.sweep();
  }

  /** Redis lost its data: put back every journalled job whose record is missing. */
  private async recover(): Promise<void> {
    let n = 0;
    const now = Date.now();
    for (const rec of [...this.entries.values()]) {
      if (now - rec.updatedAt > rec.retentionMs) {
        this.forget(rec.id);
        continue;
      }
      // A queued or given-up job goes back on the queue; one in hand here gets its record back from its own next update.
      const orphan = this.orphans.has(rec.id);
      if (rec.state !== 'queued' && !orphan) continue;
      const final = isFinal(rec.state, !!rec.callback);
      if (await this.restore(rec, !final)) n++;
      if (final) this.forget(rec.id);
    }
    this.restored += n;
    log.warn(`job queue: Redis lost its data (epoch marker gone); ${n} accepted job(s) put back from this gateway's journal`);
  }

  private async restore(rec: JobRecord, requeue: boolean): Promise<boolean> {
    const r = this.redis as unknown as { tgwJobRestore(...a: Array<string | number>): Promise<number> };
    const args = [`${this.ns}:job:${rec.id}`, `${this.ns}:jobs:stream`, 'runners', rec.id, String(rec.rev), rec.state];
    return (await r.tgwJobRestore(...args, JSON.stringify(rec), rec.retentionMs, requeue ? '1' : '0')) === 1;
  }

  private forget(id: string): void {
    this.entries.delete(id);
    this.orphans.delete(id);
  }

  /** Drop jobs another replica finished (final in Redis) and those past retention. */
  private async sweep(): Promise<void> {
    const ids = [...this.entries.keys()];
    if (!ids.length) return;
    const p = this.redis.pipeline();
    for (const id of ids) p.hget(`${this.ns}:job:${id}`, 'state');
    const res = (await p.exec()) ?? [];
    const now = Date.now();
    res.forEach(([err, state], i) => {
      const rec = this.entries.get(ids[i]!);
      if (err || !rec) return;
      if ((state && isFinal(state as JobState, !!rec.callback)) || now - rec.updatedAt > rec.retentionMs) this.forget(rec.id);
    });
  }

  get(id: string): Promise<JobRecord | null> {
    return this.inner.get(id);
  }
  take(consumer: string, max: number, waitMs: number): Promise<Taken[]> {
    return this.inner.take(consumer, max, waitMs);
  }
  reclaim(consumer: string, minIdleMs: number, max: number): Promise<Taken[]> {
    return this.inner.reclaim(consumer, minIdleMs, max);
  }
  touch(consumer: string, entries: string[]): Promise<void> {
    return this.inner.touch(consumer, entries);
  }
  release(entry: string, delayMs: number): Promise<void> {
    return this.inner.release(entry, delayMs);
  }
  ack(entry: string): Promise<void> {
    return this.inner.ack(entry);
  }
  recent(limit: number): Promise<JobRecord[]> {
    return this.inner.recent(limit);
  }
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.checking;
    this.redis.disconnect();
    await this.inner.close();
  }
}
