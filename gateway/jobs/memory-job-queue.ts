// In-memory JobQueue for a single gateway without Redis. Records and the
// queue live in this process only: they do NOT survive a restart or a crash
// (docs/gateway/async-jobs-and-webhooks.md says so); with several replicas each has its own jobs.
//
// Ownership: owns the record map, the FIFO and its waiters. Event loop only.
// Records are pruned lazily once their retention has passed.
import type { JobQueue, Taken } from './job-queue.ts';
import { newJobRecord, nextRecord, type JobRecord, type JobState, type NewJob } from './job-state.ts';

export class MemoryJobQueue implements JobQueue {
  readonly kind = 'memory' as const;
  private readonly records = new Map<string, JobRecord>();
  private readonly fifo: string[] = [];
  private readonly held = new Set<string>();
  private waiters: Array<() => void> = [];
  private readonly timers = new Set<NodeJS.Timeout>();
  private closed = false;

  constructor(private readonly now: () => number = Date.now) {}

  async enqueue(job: NewJob): Promise<JobRecord> {
    this.prune();
    const rec = newJobRecord(job, this.now());
    this.records.set(rec.id, rec);
    this.push(rec.id);
    return structuredClone(rec);
  }

  async get(id: string): Promise<JobRecord | null> {
    const r = this.records.get(id);
    if (!r) return null;
    if (this.expired(r)) {
      this.records.delete(id);
      return null;
    }
    return structuredClone(r);
  }

  async update(rec: JobRecord, to: JobState | null, patch: Partial<JobRecord> = {}): Promise<JobRecord | null> {
    const cur = this.records.get(rec.id);
    if (!cur || cur.rev !== rec.rev) return null;
    const next = nextRecord(cur, to, patch, this.now());
    this.records.set(next.id, next);
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

  private push(id: string): void {
    this.fifo.push(id);
    const w = this.waiters.shift();
    w?.();
  }

  private expired(r: JobRecord): boolean {
    return this.now() - r.updatedAt > r.retentionMs;
  }

  private prune(): void {
    for (const [id, r] of this.records) if (this.expired(r) && !this.held.has(id)) this.records.delete(id);
  }
}
