// A request's own deadline, its `timeout` parameter (Triton's schedule-policy
// extension, microseconds), kept around the whole infer pipeline: when it
// passes before the answer, the caller gets Triton's UNAVAILABLE "Request
// timeout expired" whatever the model's instance is doing, and the request is
// cancelled (it leaves any queue; a late result is dropped, never written to
// a client's shm region). The request itself keeps its shm inputs until its
// execution really ends: only the caller's wait is cut short. The gRPC
// deadline (grpc-timeout) is kept by the gRPC frontends themselves.
import type { InferRequest, InferResponse } from '../api/infer-request.ts';
import type { ModelConfig } from '../api/model-config.ts';
import { RequestCancel } from '../api/cancel-signal.ts';
import { unavailable } from '../api/status.ts';

/** Triton's text for a request whose timeout passed (also the queue's REJECT text). */
export const REQUEST_TIMEOUT_EXPIRED = 'Request timeout expired';

/**
 * Whether the `timeout` parameter bounds the whole request on this model.
 * Not where the model's queue policy for the request's priority level says
 * DELAY with allow_timeout_override: there a timed-out request is kept, at the
 * back of its level (Triton's meaning), so failing it would break the policy.
 */
export function timeoutBoundsRequest(config: ModelConfig | undefined, priority: number | undefined): boolean {
  const db = config?.dynamic_batching;
  if (!db || !(config!.max_batch_size > 0)) return true;
  const levels = db.priority_levels ?? 0;
  const level = levels > 0 ? (priority && priority > 0 ? priority : db.default_priority_level || 1) : 0;
  const policy = (levels > 0 ? db.priority_queue_policy?.[String(level)] : undefined) ?? db.default_queue_policy;
  return !(policy?.timeout_action === 'DELAY' && policy.allow_timeout_override === true);
}

/**
 * Run `run` for `req` and answer by the request's deadline: `req.timeoutUs`
 * after its arrival. Without a timeout (or where timeoutBoundsRequest says
 * no) this is `run()` itself. `configOf` gives the model's config, or
 * undefined when the model is not loaded (yet).
 */
export function answerByDeadline(
  req: InferRequest,
  run: () => Promise<InferResponse>,
  configOf: () => ModelConfig | undefined,
): Promise<InferResponse> {
  const us = req.timeoutUs;
  if (!us || !timeoutBoundsRequest(configOf(), req.priority)) return run();
  const arrival = req.arrivalNs ?? process.hrtime.bigint();
  const leftMs = us / 1000 - Number(process.hrtime.bigint() - arrival) / 1e6;
  // The request's signal becomes ours: aborted by the client's (when it goes
  // away) or by the deadline, so schedulers drop it from their queues.
  const client = req.signal;
  const cancel = new RequestCancel();
  const onClientAbort = () => cancel.abort();
  if (client?.aborted) cancel.abort();
  else client?.addEventListener('abort', onClientAbort, { once: true });
  req.signal = cancel;
  return new Promise<InferResponse>((resolve, reject) => {
    const timer = setTimeout(
      () => {
        cancel.abort();
        reject(unavailable(REQUEST_TIMEOUT_EXPIRED));
      },
      Math.max(0, Math.ceil(leftMs)),
    );
    // Settling twice is a no-op: after the deadline the late outcome is dropped.
    run()
      .then(resolve, reject)
      .finally(() => {
        clearTimeout(timer);
        client?.removeEventListener('abort', onClientAbort);
      });
  });
}
