// Decoupled models (model_transaction_policy { decoupled: true }) answer any
// number of responses per request, so only a streaming frontend can carry
// them; unary endpoints refuse them with Triton's messages.
import type { ModelConfig } from './model-config.ts';
import type { ServerApi } from './server-api.ts';
import { unsupported } from './status.ts';

export const DECOUPLED_GRPC_MESSAGE = "ModelInfer RPC doesn't support models with decoupled transaction policy";
export const DECOUPLED_HTTP_MESSAGE = "HTTP end point doesn't support models with decoupled transaction policy";

/** model_transaction_policy { decoupled: true } */
export function isDecoupled(config: ModelConfig): boolean {
  return !!(config.model_transaction_policy as { decoupled?: boolean } | undefined)?.decoupled;
}

/** Throw UNSUPPORTED with `message` when a unary request names a decoupled model (unknown models pass: infer reports them). */
export function rejectDecoupled(api: ServerApi, model: string, version: string | undefined, message: string): void {
  let config: ModelConfig;
  try {
    config = api.modelConfig(model, version || undefined);
  } catch {
    return;
  }
  if (isDecoupled(config)) throw unsupported(message);
}
