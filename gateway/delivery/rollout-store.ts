// Where rollouts live, shared by every gateway: the record of each rollout,
// which one is active per function (one at a time), the finished ones (the
// deploy history's rollout entries), each step's numbers per side, and a
// short lock so one gateway at a time judges a rollout. Two implementations
// share this contract: MemoryRolloutStore (one process) and
// RedisRolloutStore (redis-rollout-store.ts).
import type { RolloutRecord } from './rollout-spec.ts';

/** Counts one gateway adds for one side of one step. */
export interface StatDelta {
  calls: number;
  errors: number;
  /** Latency bucket index -> calls (gate-analysis.ts's buckets). */
  buckets: Map<number, number>;
  /** Shadow only: sum over calls of the largest output difference, in millionths. */
  diffMicro?: number;
  /** Shadow only: calls whose outputs did not line up (shape, datatype, bytes). */
  mismatches?: number;
}

/** How many finished rollouts the history keeps. */
export const DONE_LIMIT = 100;

export interface RolloutStore {
  readonly kind: 'memory' | 'redis';
  /** Store a new running rollout; false (nothing stored) when its function already has one. */
  create(r: RolloutRecord): Promise<boolean>;
  /** Write a changed record; a finished one leaves the active set and joins the history. */
  save(r: RolloutRecord): Promise<void>;
  /** The running rollouts. */
  active(): Promise<RolloutRecord[]>;
  /** A rollout by id (running or finished). */
  byId(id: string): Promise<RolloutRecord | null>;
  /** Finished rollouts, newest first. */
  done(): Promise<RolloutRecord[]>;
  /** Add one gateway's counts to a step's side. */
  addStats(id: string, step: number, side: string, d: StatDelta): Promise<void>;
  /** A step's side, summed over every gateway. */
  readStats(id: string, step: number, side: string): Promise<StatDelta>;
  /** Take (or renew) the judge's lock of one function for ttlMs; true when `owner` holds it. */
  lock(fn: string, owner: string, ttlMs: number): Promise<boolean>;
  close(): Promise<void>;
}

const emptyDelta = (): StatDelta => ({ calls: 0, errors: 0, buckets: new Map() });

/** Add b into a (in place). */
export function mergeDelta(a: StatDelta, b: StatDelta): StatDelta {
  a.calls += b.calls;
  a.errors += b.errors;
  for (const [i, n] of b.buckets) a.buckets.set(i, (a.buckets.get(i) ?? 0) + n);
  if (b.diffMicro) a.diffMicro = (a.diffMicro ?? 0) + b.diffMicro;
  if (b.mismatches) a.mismatches = (a.mismatches ?? 0) + b.mismatches;
  return a;
}

/** Rollouts of one process (no Redis): the same contract, records copied in and out like JSON. */
export class MemoryRolloutStore implements RolloutStore {
  readonly kind = 'memory' as const;
  private readonly records = new Map<string, string>();
  private readonly activeByFn = new Map<string, string>();
  private finished: string[] = [];
  private readonly stats = new Map<string, StatDelta>();
  private readonly locks = new Map<string, { owner: string; until: number }>();

  async create(r: RolloutRecord): Promise<boolean> {
    if (this.activeByFn.has(r.function)) return false;
    this.activeByFn.set(r.function, r.id);
    this.records.set(r.id, JSON.stringify(r));
    return true;
  }

  async save(r: RolloutRecord): Promise<void> {
    this.records.set(r.id, JSON.stringify(r));
    if (r.state !== 'running' && this.activeByFn.get(r.function) === r.id) {
      this.activeByFn.delete(r.function);
      this.finished = [r.id, ...this.finished].slice(0, DONE_LIMIT);
    }
  }

  async active(): Promise<RolloutRecord[]> {
    return [...this.activeByFn.values()].map((id) => JSON.parse(this.records.get(id)!) as RolloutRecord);
  }

  async byId(id: string): Promise<RolloutRecord | null> {
    const s = this.records.get(id);
    return s ? (JSON.parse(s) as RolloutRecord) : null;
  }

  async done(): Promise<RolloutRecord[]> {
    return this.finished.map((id) => JSON.parse(this.records.get(id)!) as RolloutRecord);
  }

  async addStats(id: string, step: number, side: string, d: StatDelta): Promise<void> {
    const k = `${id}:${step}:${side}`;
    this.stats.set(k, mergeDelta(this.stats.get(k) ?? emptyDelta(), d));
  }

  async readStats(id: string, step: number, side: string): Promise<StatDelta> {
    return mergeDelta(emptyDelta(), this.stats.get(`${id}:${step}:${side}`) ?? emptyDelta());
  }

  async lock(fn: string, owner: string, ttlMs: number): Promise<boolean> {
    const now = Date.now();
    const l = this.locks.get(fn);
    if (l && l.owner !== owner && l.until > now) return false;
    this.locks.set(fn, { owner, until: now + ttlMs });
    return true;
  }

  async close(): Promise<void> {}
}
