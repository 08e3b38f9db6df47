// One scheduler contract (Triton's src/scheduler.h): instance pool, dynamic
// batcher and ensemble scheduler all offer enqueue / inflightCount / stop, and
// a model only delegates to its scheduler.
import type { InferRequest, InferResponse } from './infer-request.ts';
import { StatusError } from './status.ts';
import type { ExecutionTiming } from './request-trace.ts';

// Importers keep reading ExecutionTiming from scheduler.ts.
export type { ExecutionTiming } from './request-trace.ts';

export interface Scheduler {
  /** Queue a request; resolves with its response or rejects with a StatusError. */
  enqueue(request: InferRequest): Promise<InferResponse>;
  /** Requests accepted and not yet answered. */
  inflightCount(): number;
  /** Stop accepting (new enqueues reject UNAVAILABLE) and resolve once in-flight work is done. */
  stop(): Promise<void>;
}

export interface ExecuteResult {
  /** One entry per request, same order; a StatusError fails only that request. */
  responses: Array<InferResponse | StatusError>;
  timing: ExecutionTiming;
  /**
   * Set by a decoupled instance that is free again before its requests'
   * streams end (Triton frees a decoupled model's instance once execute
   * returns): one final outcome per request, same order, when each stream has
   * ended. `responses` is then not read.
   */
  streams?: Promise<Array<InferResponse | StatusError>>;
}

/**
 * One execution instance of a backend model (Triton's TRITONBACKEND_ModelInstance).
 * `execute` is never called twice at once on one instance: the pool guarantees it.
 */
export interface ExecutionInstance {
  readonly name: string;
  execute(requests: InferRequest[]): Promise<ExecuteResult>;
}

/**
 * Why a request failed, as Triton's nv_inference_request_failure `reason`
 * label says (core infer_stats.h FailureReason): REJECTED by its scheduler
 * (queue full, timeout in the queue), CANCELED, an error from the BACKEND
 * (the model's own error, a failed execution), or OTHER (the request was
 * refused before the model ran: validation, sequence admission).
 */
export type FailureReason = 'REJECTED' | 'CANCELED' | 'BACKEND' | 'OTHER';
export const FAILURE_REASONS: readonly FailureReason[] = ['REJECTED', 'CANCELED', 'BACKEND', 'OTHER'];

const REASON = Symbol('failure reason');

/** Mark `err` as a scheduler's rejection (it is counted as REJECTED when it fails its request). */
export function rejection<E extends StatusError>(err: E): E {
  (err as E & { [REASON]?: FailureReason })[REASON] = 'REJECTED';
  return err;
}

/** The reason a request that ended in `err` failed: its mark, CANCELED for CANCELLED, else `fallback`. */
export function failureReasonOf(err: StatusError, fallback: FailureReason): FailureReason {
  const marked = (err as StatusError & { [REASON]?: FailureReason })[REASON];
  if (marked) return marked;
  return err.code === 'CANCELLED' ? 'CANCELED' : fallback;
}

/** Records what a scheduler observed into the model's statistics. */
export interface StatsSink {
  /** A request left the queue after waiting this long. */
  queued(ns: number): void;
  /**
   * One execution of `batchSize` (sum of request batch sizes, or request count when not batching).
   * `paddedBatchSize`: the batch as the model ran it, null requests of the sequence batcher included
   * (Triton's batch statistics count those; its inference count does not).
   */
  executed(batchSize: number, requestCount: number, timing: ExecutionTiming, paddedBatchSize?: number): void;
  /** A request finished; total ns from arrival. */
  succeeded(ns: number): void;
  /** A request failed; total ns from arrival, and why (OTHER when not said). */
  failed(ns: number, reason?: FailureReason): void;
}

/** The batch size a request contributes: its inputs' first dim when the model batches, else 1. */
export function requestBatchSize(request: InferRequest, maxBatchSize: number): number {
  if (maxBatchSize <= 0) return 1;
  const first = request.inputs[0];
  return first && first.shape.length > 0 ? first.shape[0]! : 1;
}

/** Record a finished request (`ns` since its arrival) in the statistics and answer it. */
export function answerRequest(
  stats: Pick<StatsSink, 'succeeded' | 'failed'>,
  ns: number,
  outcome: InferResponse | StatusError,
  resolve: (r: InferResponse) => void,
  reject: (e: StatusError) => void,
): void {
  if (outcome instanceof StatusError) {
    // What a scheduler answers with an error came from the backend, unless it says otherwise.
    stats.failed(ns, failureReasonOf(outcome, 'BACKEND'));
    reject(outcome);
  } else {
    stats.succeeded(ns);
    resolve(outcome);
  }
}
