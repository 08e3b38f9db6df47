// One ModelInfer call, shared by the two ways a unary ModelInfer reaches the
// engine: grpc-js's handler (grpc-server.ts) and the direct HTTP/2 path
// (grpc-direct-infer.ts). Check, build the request, submit, answer once;
// the received message buffer goes back to the receive pool after the
// answer has been serialized.
import type { ServerApi } from '../../api/server-api.ts';
import type { InferRequest, InferResponse } from '../../api/infer-request.ts';
import { DECOUPLED_GRPC_MESSAGE } from '../../api/decoupled.ts';
import { release } from './receive-pool.ts';
import type { RequestCancel } from '../../api/cancel-signal.ts';
import { capMessage, grpcStatusOf, toStatusError } from '../../api/status.ts';
import { log } from '../../../common/logger.ts';
import { toInferRequest, toInferResponse } from './grpc-tensors.ts';
import type { GrpcOutcome } from '../../../protocol/grpc-status.ts';
import type { ModelInferRequest, ModelInferResponse } from '../../../protocol/kserve-messages.ts';

/**
 * Run the decoded request `msg`. `answer` is called exactly once, with the
 * response message or the error; it must serialize the response before it
 * returns: the request's tensors are views of `received`, which is given
 * back to the receive pool right after.
 */
export function modelInferCall(
  api: ServerApi,
  msg: ModelInferRequest,
  received: Buffer | undefined,
  traceparent: string | undefined,
  signal: RequestCancel,
  answer: (err: unknown, res?: ModelInferResponse<Uint8Array>) => void,
): void {
  let req;
  try {
    req = toInferRequest(msg);
  } catch (err) {
    finish(answer, received, err);
    return;
  }
  req.arrivalNs = process.hrtime.bigint();
  req.unaryOnly = DECOUPLED_GRPC_MESSAGE;
  req.signal = signal;
  req.traceparent = traceparent;
  void submit(api, req, received, answer);
}

// Module-level functions, not per-call closures: tsx (esbuild keepNames)
// wraps every closure created per request in an __name() call (a
// defineProperty each), a few percent of the main thread on a tiny model.
async function submit(api: ServerApi, req: InferRequest, received: Buffer | undefined, answer: Answer): Promise<void> {
  let res: InferResponse;
  try {
    res = await api.infer(req);
  } catch (err) {
    finish(answer, received, err);
    return;
  }
  finish(answer, received, undefined, res);
}

function finish(answer: Answer, received: Buffer | undefined, err: unknown, res?: InferResponse): void {
  try {
    if (res) answer(undefined, toInferResponse(res));
    else answer(err);
  } finally {
    release(received);
  }
}

type Answer = (err: unknown, res?: ModelInferResponse<Uint8Array>) => void;

/** The gRPC status of a failure: Triton's code mapped once, the message capped; INTERNAL ones logged with detail. */
export function grpcFailure(err: unknown): GrpcOutcome {
  const se = toStatusError(err);
  if (se.code === 'INTERNAL') log.error(se.message, se.detail ?? err);
  return { code: grpcStatusOf(se.code), details: capMessage(se.message) };
}
