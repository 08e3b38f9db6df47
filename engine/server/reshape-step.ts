// The infer pipeline's `reshape` step (engine/config/reshape.ts): inputs go
// to the scheduler in their reshape shape, every response (unary or streamed)
// comes back in the config's dims before it is checked, cached or sent.
import type { InferRequest, InferResponse } from '../api/infer-request.ts';
import type { ModelConfig } from '../api/model-config.ts';
import type { StatusError } from '../api/status.ts';
import { hasReshape, reshapeInputs, reshapeOutputs } from '../config/reshape.ts';

/** Reshape the request's inputs in place; wraps its streamed-response callback to reshape outputs back. */
export function applyReshape(config: ModelConfig, req: InferRequest): void {
  if (!hasReshape(config)) return;
  req.inputs = reshapeInputs(config, req.inputs);
  const deliver = req.onResponse;
  if (deliver) req.onResponse = (r: InferResponse | StatusError) => deliver(r instanceof Error ? r : reshapeResponse(config, r));
}

/** A response with its outputs back in the config's dims. */
export function reshapeResponse(config: ModelConfig, res: InferResponse): InferResponse {
  if (!hasReshape(config) || res.streamEnd) return res;
  res.outputs = reshapeOutputs(config, res.outputs);
  return res;
}
