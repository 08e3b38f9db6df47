// In-memory JobQueue for a single gateway without Redis. Records and the
// queue live in this process only: they do NOT survive a restart or a crash
// (docs/gateway/async-jobs-and-webhooks.md says so); with several replicas each has its own jobs.
//
// Ownership: owns the record map, the FIFO and its waiters. Event loop only.
// Records are pruned lazily once their retention has passed, and the store is
// bounded (`MemoryJobLimits`: a record count and an estimate of their bytes):
// past either bound the oldest finished records go first, before their
// retention ends; when only unfinished jobs are left, a new job is refused
// (503 JOBS_FULL) rather than let the gateway's heap grow without end.
import { gatewayError } from '../core/errors.ts';
import type { JobQueue, Taken } from './job-queue.ts';
import { isFinal, newJobRecord, nextRecord, type JobRecord, type JobState, type NewJob } from './job-state.ts';

/** Bounds of the in-memory job store (gateway flags --job-records-max, --job-records-max-bytes). */
export interface MemoryJobLimits {
  /** Records kept at most, finished or not. */
  maxRecords: number;
  /** Estimated bytes of the records kept at most (payloads, results: approxBytes). */
  maxBytes: number;
}

/** Seconds a JOBS_FULL refusal announces in Retry-After: about when a running job finishes and frees its record. */
export const JOBS_FULL_RETRY_AFTER_S = 5;

export const DEFAULT_MEMORY_JOB_LIMITS: MemoryJobLimits = { maxRecords: 10_000, maxBytes: 128 * 1024 * 1024 };

/** Fixed cost counted per record besides its fields' contents (the record object, map entry, id). */
const RECORD_OVERHEAD = 512;

/**
 * A cheap estimate of what a JSON-like value holds in bytes: string lengths,
 * 8 per number, 16 per property or element. Not V8's exact layout; what the
 * store's byte bound is counted in.
 */
export function approxBytes(v: unknown): number {
  if (typeof v === 'string') return v.length;
  if (typeof v !== 'object' || v === null) return 8;
  let n = 0;
  if (Array.isArray(v)) for (const x of v) n += 16 + approxBytes(x);
  else for (const k in v) n += 16 + k.length + approxBytes((v as Record<string, unknown>)[k]);
  return n;
}

const sizeOf = (r: JobRecord) => RECORD_OVERHEAD + approxBytes(r.payload) + approxBytes(r.result) + (r.lastError?.length ?? 0);

export class MemoryJobQueue implements JobQueue {
  readonly kind = 'memory' as const;
  /** Insertion order is creation order (an update re-sets an existing key in place): eviction walks it oldest first. */
  private readonly records = new Map<string, JobRecord>();
  private readonly sizes = new Map<string, number>();
  private bytes = 0;
  private readonly limits: MemoryJobLimits;
  private readonly fifo: string[] = [];
  private readonly held = new Set<string>();
  private waiters: Array<() => void> = [];
  private readonly timers = new Set<NodeJS.Timeout>();
  private closed = false;

  constructor(
    private readonly now: () => number = Date.now,
    limits: Partial<MemoryJobLimits> = {},
  ) {
    this.limits = { ...DEFAULT_MEMORY_JOB_LIMITS, ...limits };
  }

  /** Refused with JOBS_FULL when the bounds leave no room once every finished record is gone. */
  async enqueue(job: NewJob): Promise<JobRecord> {
    this.prune();
    const rec = newJobRecord(job, this.now());
    const size = sizeOf(rec);
    this.evict(1, size);
    if (this.records.size + 1 > this.limits.maxRecords || this.bytes + size > this.limits.maxBytes) {
      const full = this.records.size + 1 > this.limits.maxRecords;
      const err = gatewayError('JOBS_FULL', { limit: full ? `${this.limits.maxRecords} records` : `${this.limits.maxBytes} bytes` });
      err.headers = { 'retry-after': String(JOBS_FULL_RETRY_AFTER_S) };
      throw err;
    }
    this.store(rec);
    this.push(rec.id);
    return structuredClone(rec);
  }

  async get(id: string): Promise<JobRecord | null> {
    const r = this.records.get(id);
    if (!r) return null;
    if (this.expired(r)) {
      this.drop(id);
      return null;
    }
    return structuredClone(r);
  }

  /** A result that takes the store past its byte bound evicts the oldest finished records; it is never refused. */
  async update(rec: JobRecord, to: JobState | null, patch: Partial<JobRecord> = {}): Promise<JobRecord | null> {
    const cur = this.records.get(rec.id);
    if (!cur || cur.rev !== rec.rev) return null;
    const next = nextRecord(cur, to, patch, this.now());
    this.store(next);
    if (this.bytes > this.limits.maxBytes) this.evict(0, 0);
    return structuredClone(next);
  }

  async take(_consumer: string, max: number, waitMs: number): Promise<Taken[]> {
    if (!this.fifo.length && waitMs > 0 && !this.closed) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(done, waitMs);
        const self = this;
        function done() {
          clearTimeout(t);
          self.waiters = self.waiters.filter((w) => w !== done);
          resolve();
        }
        this.waiters.push(done);
      });
    }
    const out: Taken[] = [];
    while (out.length < max && this.fifo.length) {
      const id = this.fifo.shift()!;
      this.held.add(id);
      out.push({ id, entry: id });
    }
    return out;
  }

  /** One process: a job is never held by a dead runner, so nothing to reclaim. */
  async reclaim(): Promise<Taken[]> {
    return [];
  }

  async touch(): Promise<void> {}

  async release(entry: string, delayMs: number): Promise<void> {
    this.held.delete(entry);
    const t = setTimeout(() => {
      this.timers.delete(t);
      if (!this.closed) this.push(entry);
    }, delayMs);
    this.timers.add(t);
  }

  async ack(entry: string): Promise<void> {
    this.held.delete(entry);
  }

  async recent(limit: number): Promise<JobRecord[]> {
    this.prune();
    return [...this.records.values()]
      .sort((a, b) => b.createdAt - a.createdAt)
      .slice(0, limit)
      .map((r) => structuredClone(r));
  }

  interruptTake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    for (const w of this.waiters.splice(0)) w();
  }

  /** Jobs waiting to be taken (for tests and /readyz). */
  get depth(): number {
    return this.fifo.length;
  }

  /** Records held and their estimated bytes (for tests and the soak). */
  get size(): { records: number; bytes: number } {
    return { records: this.records.size, bytes: this.bytes };
  }

  private store(rec: JobRecord): void {
    const size = sizeOf(rec);
    this.bytes += size - (this.sizes.get(rec.id) ?? 0);
    this.sizes.set(rec.id, size);
    this.records.set(rec.id, rec);
  }

  private drop(id: string): void {
    this.bytes -= this.sizes.get(id) ?? 0;
    this.sizes.delete(id);
    this.records.delete(id);
  }

  /** Drop the oldest finished records (not held by a runner) until `records` more records of `bytes` fit. */
  private evict(records: number, bytes: number): void {
    const fits = () => this.records.size + records <= this.limits.maxRecords && this.bytes + bytes <= this.limits.maxBytes;
    if (fits()) return;
    for (const [id, r] of this.records) {
      if (this.held.has(id) || !isFinal(r.state, r.callback !== undefined)) continue;
      this.drop(id);
      if (fits()) return;
    }
  }

  private push(id: string): void {
    this.fifo.push(id);
    const w = this.waiters.shift();
    w?.();
  }

  private expired(r: JobRecord): boolean {
    return this.now() - r.updatedAt > r.retentionMs;
  }

  private prune(): void {
    for (const [id, r] of this.records) if (this.expired(r) && !this.held.has(id)) this.drop(id);
  }
}
