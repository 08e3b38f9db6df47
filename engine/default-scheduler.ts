// The scheduler of a model without dynamic batching (Triton's default
// scheduler): every request runs alone, FIFO, on the next free instance of the
// model's InstancePool. Runs on the caller's thread; execute() calls are async
// and at most one per instance at a time (the pool hands each out once).
import type { InferRequest, InferResponse } from './infer-request.ts';
import type { InstancePool } from './instance-pool.ts';
import type { ExecuteResult, ExecutionInstance, Scheduler, StatsSink } from './scheduler.ts';
import { requestBatchSize } from './scheduler.ts';
import { systemClock, type Clock } from './scheduler-queue.ts';
import { cancelled, internal, StatusError, toStatusError, unavailable } from './status.ts';
import { log, tracer } from './trace.ts';

export type { Clock } from './scheduler-queue.ts';

const trace = tracer('batcher');

export interface DefaultSchedulerOptions {
  modelName: string;
  pool: InstancePool;
  stats: StatsSink;
  clock?: Clock;
  /** The model's max_batch_size, only to report each execution's batch size; default 0 (size 1). */
  maxBatchSize?: number;
}

interface Queued {
  request: InferRequest;
  resolve: (r: InferResponse) => void;
  reject: (e: StatusError) => void;
  enqueuedNs: bigint;
  onAbort?: () => void;
}

/**
 * Run `requests` on `instance` and check the result's shape. Never throws: an
 * execute that throws or rejects, or answers the wrong number of responses,
 * becomes one StatusError for the whole batch.
 */
export async function runOnInstance(
  instance: ExecutionInstance,
  requests: InferRequest[],
  modelName: string,
): Promise<ExecuteResult | StatusError> {
  // Shm inputs are checked right before the execution reads them: a region
  // truncated while the request waited fails that request, not the batch.
  const lost = requests.map(shmProblem);
  if (lost.some((e) => e)) return runWithout(instance, requests, lost, modelName);
  return runChecked(instance, requests, modelName);
}

/** The first shm input of `r` whose region no longer holds its bytes, as a StatusError. */
function shmProblem(r: InferRequest): StatusError | undefined {
  for (const t of r.inputs) {
    const e = t.shmCheck?.();
    if (e) return toStatusError(e);
  }
  return undefined;
}

/** Run the requests whose inputs are intact; the others answer their own error. */
async function runWithout(
  instance: ExecutionInstance,
  requests: InferRequest[],
  lost: Array<StatusError | undefined>,
  modelName: string,
): Promise<ExecuteResult | StatusError> {
  const keep = requests.filter((_, i) => !lost[i]);
  const zero = { computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0 };
  const ran = keep.length ? await runChecked(instance, keep, modelName) : { responses: [], timing: zero };
  let k = 0;
  const responses = requests.map((_, i) => lost[i] ?? (ran instanceof StatusError ? ran : ran.responses[k++]!));
  return { responses, timing: ran instanceof StatusError ? zero : ran.timing };
}

async function runChecked(
  instance: ExecutionInstance,
  requests: InferRequest[],
  modelName: string,
): Promise<ExecuteResult | StatusError> {
  try {
    const result = await instance.execute(requests);
    if (!result || !Array.isArray(result.responses) || result.responses.length !== requests.length) {
      return internal(
        `instance '${instance.name}' of model '${modelName}' returned ${result?.responses?.length} responses for ${requests.length} requests`,
      );
    }
    return result;
  } catch (err) {
    const e = toStatusError(err);
    if (!(err instanceof StatusError)) log.error(`instance '${instance.name}' of model '${modelName}' failed`, err);
    return e;
  }
}

export class DefaultScheduler implements Scheduler {
  private readonly modelName: string;
  private readonly pool: InstancePool;
  private readonly stats: StatsSink;
  private readonly clock: Clock;
  private readonly maxBatchSize: number;
  private readonly queue: Queued[] = [];
  private inflight = 0;
  private stopping = false;
  private acquiring = false;
  private drained: Array<() => void> = [];

  constructor(opts: DefaultSchedulerOptions) {
    this.modelName = opts.modelName;
    this.pool = opts.pool;
    this.stats = opts.stats;
    this.clock = opts.clock ?? systemClock;
    this.maxBatchSize = opts.maxBatchSize ?? 0;
  }

  enqueue(request: InferRequest): Promise<InferResponse> {
    if (this.stopping) return Promise.reject(unavailable(`model '${this.modelName}' is not accepting requests`));
    if (request.signal?.aborted) return Promise.reject(cancelled(`request for model '${this.modelName}' was cancelled`));
    const now = this.clock.nowNs();
    request.arrivalNs ??= now;
    return new Promise<InferResponse>((resolve, reject) => {
      const q: Queued = { request, resolve, reject, enqueuedNs: now };
      if (request.signal) {
        q.onAbort = () => this.cancel(q);
        request.signal.addEventListener('abort', q.onAbort, { once: true });
      }
      this.queue.push(q);
      this.inflight++;
      this.pump();
    });
  }

  inflightCount(): number {
    return this.inflight;
  }

  stop(): Promise<void> {
    this.stopping = true;
    if (this.inflight === 0) return Promise.resolve();
    return new Promise((resolve) => this.drained.push(resolve));
  }

  private cancel(q: Queued): void {
    const i = this.queue.indexOf(q);
    if (i < 0) return; // already running
    this.queue.splice(i, 1);
    this.finish(q, cancelled(`request for model '${this.modelName}' was cancelled`));
  }

  /** Start as many queued requests as there are free instances; wait for one when none is. */
  private pump(): void {
    while (this.queue.length > 0) {
      const instance = this.pool.tryAcquire();
      if (!instance) break;
      void this.run(instance, this.queue.shift()!);
    }
    if (this.queue.length > 0 && !this.acquiring) {
      this.acquiring = true;
      void this.pool.acquire().then((instance) => {
        this.acquiring = false;
        const q = this.queue.shift();
        if (q) void this.run(instance, q);
        else this.pool.release(instance);
        this.pump();
      });
    }
  }

  private async run(instance: ExecutionInstance, q: Queued): Promise<void> {
    if (q.onAbort) q.request.signal?.removeEventListener('abort', q.onAbort);
    this.stats.queued(Number(this.clock.nowNs() - q.enqueuedNs));
    trace(`model '${this.modelName}' executing 1 request on '${instance.name}'`, q.request.id);
    const result = await runOnInstance(instance, [q.request], this.modelName);
    this.pool.release(instance);
    if (result instanceof StatusError) {
      this.finish(q, result);
    } else {
      this.stats.executed(requestBatchSize(q.request, this.maxBatchSize), 1, result.timing);
      this.finish(q, result.responses[0]!);
    }
    this.pump();
  }

  private finish(q: Queued, outcome: InferResponse | StatusError): void {
    const ns = Number(this.clock.nowNs() - (q.request.arrivalNs ?? q.enqueuedNs));
    if (outcome instanceof StatusError) {
      this.stats.failed(ns);
      q.reject(outcome);
    } else {
      this.stats.succeeded(ns);
      q.resolve(outcome);
    }
    this.inflight--;
    if (this.inflight === 0 && this.drained.length > 0) {
      for (const d of this.drained.splice(0)) d();
    }
  }
}
