// Decoupled models (model_transaction_policy { decoupled: true }) answer any
// number of responses per request, so only a streaming frontend can carry
// them; unary endpoints refuse them with Triton's messages (InferRequest.unaryOnly,
// checked by the inference server once it has the model).
import type { ModelConfig } from './model-config.ts';

export const DECOUPLED_GRPC_MESSAGE = "ModelInfer RPC doesn't support models with decoupled transaction policy";
export const DECOUPLED_HTTP_MESSAGE = "HTTP end point doesn't support models with decoupled transaction policy";

/** model_transaction_policy { decoupled: true } */
export function isDecoupled(config: ModelConfig): boolean {
  return !!(config.model_transaction_policy as { decoupled?: boolean } | undefined)?.decoupled;
}
