// One ModelInfer call, shared by the two ways a unary ModelInfer reaches the
// engine: grpc-js's handler (grpc-server.ts) and the direct HTTP/2 path
// (grpc-direct-infer.ts). Check, build the request, submit, answer once;
// the received message buffer goes back to the receive pool after the
// answer has been serialized.
import type { ServerApi } from '../../api/server-api.ts';
import type { InferResponse } from '../../api/infer-request.ts';
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
  const finish = (err: unknown, res?: InferResponse) => {
    try {
      if (res) answer(undefined, toInferResponse(res));
      else answer(err);
    } finally {
      release(received);
    }
  };
  let req;
  try {
    req = toInferRequest(msg);
  } catch (err) {
    finish(err);
    return;
  }
  req.arrivalNs = process.hrtime.bigint();
  req.unaryOnly = DECOUPLED_GRPC_MESSAGE;
  req.signal = signal;
  req.traceparent = traceparent;
  api.infer(req).then((res) => finish(undefined, res), (err) => finish(err));
}

/** The gRPC status of a failure: Triton's code mapped once, the message capped; INTERNAL ones logged with detail. */
export function grpcFailure(err: unknown): GrpcOutcome {
  const se = toStatusError(err);
  if (se.code === 'INTERNAL') log.error(se.message, se.detail ?? err);
  return { code: grpcStatusOf(se.code), details: capMessage(se.message) };
}
