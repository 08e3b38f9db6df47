// The JobQueue contract shared by MemoryJobQueue and RedisJobQueue: job
// records (state, outcome, delivery progress) plus a work queue that hands
// each accepted job to one runner and keeps it owned until acknowledged.
import type { JobRecord, JobState, NewJob } from './job-state.ts';

/** A job handed to a runner: `entry` identifies the queue entry to ack. */
export interface Taken {
  id: string;
  entry: string;
}

export interface JobQueue {
  readonly kind: 'memory' | 'redis';
  /** Store a queued record and put it on the queue; resolves once it is durable (Redis) or held (memory). */
  enqueue(job: NewJob): Promise<JobRecord>;
  get(id: string): Promise<JobRecord | null>;
  /**
   * Guarded update: the transition rec.state → `to` (null: same state) with
   * `patch`, written only if the stored record is still at rec.rev. Returns
   * the new record, or null when another writer got there first.
   */
  update(rec: JobRecord, to: JobState | null, patch?: Partial<JobRecord>): Promise<JobRecord | null>;
  /** Up to `max` new jobs for `consumer`, waiting up to waitMs for one. */
  take(consumer: string, max: number, waitMs: number): Promise<Taken[]>;
  /** End a waiting take now, with what is there (a runner stopping); a queue that cannot cut a wait short lets it run out. */
  interruptTake?(): void;
  /** Up to `max` jobs whose owner has not touched them for minIdleMs (dead runner), now owned by `consumer`. */
  reclaim(consumer: string, minIdleMs: number, max: number): Promise<Taken[]>;
  /** Heartbeat: the consumer still holds these entries. */
  touch(consumer: string, entries: string[]): Promise<void>;
  /** Give an entry back to be run again after delayMs (a retryable failure). */
  release(entry: string, delayMs: number): Promise<void>;
  /** The job is finished with: remove its entry from the queue. */
  ack(entry: string): Promise<void>;
  /** The newest jobs still retained, newest first, at most `limit` (the console's job list). */
  recent(limit: number): Promise<JobRecord[]>;
  close(): Promise<void>;
}
