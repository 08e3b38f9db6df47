// The lifecycle of one asynchronous job, as an enum with one guarded
// transition function (STYLE point 7). A job is queued when accepted, running
// while a runner calls the function, then succeeded or failed. A job with a
// callback URL goes on to delivering (attempts to POST the result) and ends
// delivered, or dead when the attempts ran out. A job whose runner died, or
// whose run met a retryable error (engine unavailable), goes back to queued.
import { checkTransition, type TransitionTable } from '../../common/lifecycle.ts';
import { newJobId } from './job-id.ts';

export const JOB_STATES = ['queued', 'running', 'succeeded', 'failed', 'delivering', 'delivered', 'dead'] as const;
export type JobState = (typeof JOB_STATES)[number];

const ALLOWED: TransitionTable<JobState> = {
  queued: ['running'],
  running: ['succeeded', 'failed', 'queued'],
  succeeded: ['delivering'],
  failed: ['delivering'],
  delivering: ['delivered', 'dead'],
  delivered: [],
  dead: [],
};

/** True when a job in `from` may move to `to`. */
export function canTransition(from: JobState, to: JobState): boolean {
  return ALLOWED[from].includes(to);
}

/** The one transition check: returns `to`, or throws IllegalTransition (INTERNAL) naming "from X to Y". */
export function transition(from: JobState, to: JobState, jobId = ''): JobState {
  return checkTransition(ALLOWED, `job ${jobId}`, from, to);
}

/** States in which nothing more will happen to the job (given whether it has a callback). */
export function isFinal(state: JobState, hasCallback: boolean): boolean {
  if (state === 'delivered' || state === 'dead') return true;
  return !hasCallback && (state === 'succeeded' || state === 'failed');
}

/** Where and how a job's result is POSTed (fixed when the job is accepted). */
export interface CallbackSpec {
  url: string;
  /** Environment variable with the HMAC key; GATEWAY_WEBHOOK_SECRET when absent. */
  secretEnv?: string;
  maxAttempts: number;
  backoffMs: number;
  maxBackoffMs: number;
  attemptTimeoutMs: number;
}

/** One job as stored by a JobQueue. `payload` and `result` are opaque JSON to the queue. */
export interface JobRecord {
  id: string;
  fn: string;
  state: JobState;
  /** Write counter: every update is a compare-and-set on it. */
  rev: number;
  createdAt: number;
  updatedAt: number;
  /** How long the record is kept after its last update (ms). */
  retentionMs: number;
  /** The call to make; dropped once the job has its outcome. */
  payload?: unknown;
  callback?: CallbackSpec;
  /** HMAC of the API key the call was made with (job-access.ts); readers must present the same key. */
  keyHash?: string;
  /** HTTP status of the function's reply, and the reply JSON (the synchronous reply body). */
  status?: number;
  result?: unknown;
  /** Runs started (a re-run after a crash counts again). */
  runs: number;
  /** Delivery attempts made so far. */
  attempts: number;
  lastError?: string;
}

export type NewJob = Pick<JobRecord, 'fn' | 'payload' | 'callback' | 'retentionMs' | 'keyHash'> & { id?: string };

/** Build a fresh queued record. */
export function newJobRecord(j: NewJob, now: number): JobRecord {
  return {
    id: j.id ?? newJobId(),
    fn: j.fn,
    state: 'queued',
    rev: 1,
    createdAt: now,
    updatedAt: now,
    retentionMs: j.retentionMs,
    payload: j.payload,
    ...(j.callback ? { callback: j.callback } : {}),
    ...(j.keyHash ? { keyHash: j.keyHash } : {}),
    runs: 0,
    attempts: 0,
  };
}

/** The next version of a record: guarded state change (to = null keeps the state) plus fields. */
export function nextRecord(rec: JobRecord, to: JobState | null, patch: Partial<JobRecord>, now: number): JobRecord {
  const state = to === null ? rec.state : transition(rec.state, to, rec.id);
  const next: JobRecord = { ...rec, ...patch, state, rev: rec.rev + 1, updatedAt: now };
  if (patch.payload === undefined && 'payload' in patch) delete next.payload;
  return next;
}

/** A job as GET /jobs/<id> shows it (no payload, no secrets, no key hash). */
export function publicView(rec: JobRecord): Record<string, unknown> {
  const finished = rec.status !== undefined;
  return {
    id: rec.id,
    function: rec.fn,
    status: rec.state,
    created_at: new Date(rec.createdAt).toISOString(),
    updated_at: new Date(rec.updatedAt).toISOString(),
    ...(finished ? { outcome: rec.status! < 400 ? 'succeeded' : 'failed', http_status: rec.status } : {}),
    ...(finished && rec.status! < 400 ? { result: rec.result } : {}),
    ...(finished && rec.status! >= 400 ? { error: (rec.result as { error?: unknown } | undefined)?.error ?? rec.result } : {}),
    ...(rec.callback ? { callback: { url: rec.callback.url, attempts: rec.attempts, max_attempts: rec.callback.maxAttempts } } : {}),
    ...(rec.lastError ? { last_error: rec.lastError } : {}),
  };
}
