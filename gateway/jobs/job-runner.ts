// Runs asynchronous jobs from a JobQueue with bounded concurrency: takes new
// jobs, reclaims jobs of dead runners, calls the injected `invoke`, records
// the outcome, delivers it to the callback URL through the injected `deliver`
// (which retries), and only then acknowledges the queue entry — so a runner
// that dies at any point leaves the job to be claimed and finished by another.
//
// Ownership: owns its loops, the set of jobs in hand and their heartbeat.
// Event loop only; at most `concurrency` jobs are in hand at once.
import { GatewayError } from '../core/errors.ts';
import type { DeliveryOutcome } from '../webhooks/delivery.ts';
import type { JobQueue, Taken } from './job-queue.ts';
import { isFinal, type JobRecord } from './job-state.ts';
import { gatewayLog as log, tracer } from '../../common/logger.ts';

const trace = tracer('jobs');

/** A failed call with the reply the function gave (HTTP status + JSON body). */
export class JobCallError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    super(`call failed with HTTP ${status}`);
  }
}

export interface JobRunnerOptions {
  queue: JobQueue;
  /** This runner's consumer name (unique per process). */
  consumer: string;
  /** Call the function; resolves with the reply JSON, throws JobCallError (or a GatewayError) on failure. */
  invoke(fn: string, payload: unknown): Promise<unknown>;
  /** POST the result to the callback; `onAttempt` is called after every failed attempt. */
  deliver?(job: JobRecord, body: unknown, onAttempt: (attempts: number, error: string) => Promise<void>): Promise<DeliveryOutcome>;
  concurrency?: number;
  /** A pending job idle this long belongs to a dead runner and is reclaimed (ms). */
  claimIdleMs?: number;
  /** Longest wait of one take (ms). */
  pollMs?: number;
  /** Delay before a retryable failure (HTTP 503) is run again (memory queue) (ms). */
  retryDelayMs?: number;
}

/** The reply body and status a thrown error stands for. */
function failureOf(e: unknown): { status: number; body: unknown } {
  if (e instanceof JobCallError) return { status: e.status, body: e.body };
  if (e instanceof GatewayError) return { status: e.status, body: e.toJSON() };
  log.error('async job failed unexpectedly', e);
  return { status: 500, body: { error: { code: 'INTERNAL', message: 'internal gateway error' } } };
}

export class JobRunner {
  private readonly q: JobQueue;
  private readonly concurrency: number;
  private readonly claimIdleMs: number;
  private readonly pollMs: number;
  private readonly inHand = new Map<string, Promise<void>>();
  private running = false;
  private loop: Promise<void> | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private lastClaim = 0;
  private wake: (() => void) | undefined;

  constructor(private readonly o: JobRunnerOptions) {
    this.q = o.queue;
    this.concurrency = Math.max(1, o.concurrency ?? 4);
    this.claimIdleMs = o.claimIdleMs ?? 30_000;
    this.pollMs = o.pollMs ?? 1000;
  }

  /** Jobs being worked on now. */
  get active(): number {
    return this.inHand.size;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
    this.heartbeat = setInterval(
      () => {
        this.q.touch(this.o.consumer, [...this.inHand.keys()]).catch((e) => trace(`heartbeat failed: ${(e as Error).message}`));
      },
      Math.max(50, this.claimIdleMs / 3),
    );
    this.heartbeat.unref();
  }

  /** Stop taking jobs; wait up to timeoutMs for jobs in hand (the rest stay pending for another runner). */
  async stop(timeoutMs = 10_000): Promise<void> {
    this.running = false;
    this.wake?.();
    // A take waiting for new jobs would hold the stop up to its poll (1 s); what it returns goes back to the queue.
    this.q.interruptTake?.();
    const all = Promise.allSettled([...this.inHand.values()]);
    await Promise.race([all, new Promise((r) => setTimeout(r, timeoutMs).unref())]);
    if (this.heartbeat) clearInterval(this.heartbeat);
    await this.loop?.catch((e: unknown) => log.warn(`job runner loop ended with an error: ${(e as Error).message}`));
  }

  private async run(): Promise<void> {
    let backoff = 0;
    while (this.running) {
      const free = this.concurrency - this.inHand.size;
      if (free <= 0) {
        await new Promise<void>((r) => (this.wake = r));
        this.wake = undefined;
        continue;
      }
      try {
        let got: Taken[] = [];
        if (Date.now() - this.lastClaim >= this.claimIdleMs / 2) {
          this.lastClaim = Date.now();
          got = await this.q.reclaim(this.o.consumer, this.claimIdleMs, free);
          if (got.length) log.info(`reclaimed ${got.length} job(s) of a runner that stopped answering`);
        }
        if (!got.length) got = await this.q.take(this.o.consumer, free, Math.min(this.pollMs, this.claimIdleMs / 2));
        backoff = 0;
        for (const t of got) {
          if (this.running) this.begin(t);
          else await this.q.release(t.entry, 0); // stopped while waiting: leave it to another runner
        }
      } catch (e) {
        if (!this.running) break;
        backoff = Math.min(2000, backoff * 2 || 100);
        trace(`queue unavailable (${(e as Error).message}); retrying in ${backoff} ms`);
        await new Promise((r) => setTimeout(r, backoff));
      }
    }
  }

  private begin(t: Taken): void {
    const p = this.work(t)
      .catch((e) => log.warn(`job ${t.id}: ${(e as Error).message}; left pending for another attempt`))
      .finally(() => {
        this.inHand.delete(t.entry);
        this.wake?.();
      });
    this.inHand.set(t.entry, p);
  }

  /** Drive one job from whatever state it is in to a final one, then ack. */
  private async work(t: Taken): Promise<void> {
    let rec = await this.q.get(t.id);
    if (!rec) {
      await this.q.ack(t.entry); // expired or never written: nothing to do
      return;
    }
    if (rec.state === 'running') rec = await this.must(rec, this.q.update(rec, 'queued')); // its runner died mid-call
    if (rec.state === 'queued') {
      rec = await this.must(rec, this.q.update(rec, 'running', { runs: rec.runs + 1 }));
      trace(`job ${rec.id}: running ${rec.fn} (run ${rec.runs})`);
      let status = 200;
      let body: unknown;
      try {
        body = await this.o.invoke(rec.fn, rec.payload);
      } catch (e) {
        ({ status, body } = failureOf(e));
        if (status === 503 && this.running) {
          // engine or gateway unavailable: not the caller's fault; run it again later.
          rec = await this.must(rec, this.q.update(rec, 'queued'));
          await this.q.release(t.entry, this.o.retryDelayMs ?? 1000);
          log.warn(`job ${rec.id}: ${rec.fn} unavailable (HTTP 503); queued again`);
          return;
        }
      }
      rec = await this.must(rec, this.q.update(rec, status < 400 ? 'succeeded' : 'failed', { status, result: body, payload: undefined }));
    }
    if ((rec.state === 'succeeded' || rec.state === 'failed') && rec.callback) {
      rec = await this.must(rec, this.q.update(rec, 'delivering'));
    }
    if (rec.state === 'delivering') rec = await this.deliver(rec);
    if (isFinal(rec.state, !!rec.callback)) await this.q.ack(t.entry);
  }

  private async deliver(rec: JobRecord): Promise<JobRecord> {
    if (!this.o.deliver) throw new Error('no webhook deliverer configured');
    let cur = rec;
    const out = await this.o.deliver(cur, cur.result, async (attempts, error) => {
      cur = (await this.q.update(cur, null, { attempts, lastError: error })) ?? cur;
    });
    if (out.delivered) return this.must(cur, this.q.update(cur, 'delivered', { attempts: out.attempts }));
    log.warn(`job ${cur.id}: callback to ${cur.callback!.url} failed ${out.attempts} time(s); dead: ${out.lastError}`);
    return this.must(cur, this.q.update(cur, 'dead', { attempts: out.attempts, lastError: out.lastError }));
  }

  private async must(rec: JobRecord, p: Promise<JobRecord | null>): Promise<JobRecord> {
    const next = await p;
    if (!next) throw new Error(`job ${rec.id} was changed by another runner (rev ${rec.rev})`);
    return next;
  }
}
