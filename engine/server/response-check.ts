// The infer pipeline's check of what a model answered (api/output-check.ts)
// before anyone sees it: a unary response that does not fit the model's
// config fails its request with the error naming the output (and is never
// cached); a streamed (decoupled) response that does not fit is delivered as
// that error instead.
import type { InferRequest, InferResponse } from '../api/infer-request.ts';
import type { ModelConfig } from '../api/model-config.ts';
import type { StatusError } from '../api/status.ts';
import { checkOutputs, requestBatch } from '../api/output-check.ts';
import { lookupsOf } from '../api/config-lookups.ts';

/** The outputs a response must hold: the requested ones, or all the model's. */
export function wantedOutputs(config: ModelConfig, req: InferRequest): readonly string[] {
  return req.outputs.length ? req.outputs.map((o) => o.name) : lookupsOf(config).outputNames;
}

/** `res` when it fits the config; throws the first problem otherwise. */
export function checkedResponse(config: ModelConfig, req: InferRequest, res: InferResponse): InferResponse {
  if (res.streamEnd) return res;
  const problem = checkOutputs(config, res.outputs, wantedOutputs(config, req), requestBatch(config, req));
  if (problem) throw problem;
  return res;
}

/**
 * Wrap a streaming request's response callback: each response is checked (a
 * decoupled response may hold any subset of the outputs), and none is
 * delivered once the request was abandoned (deadline passed, client gone).
 */
export function checkStreamedResponses(config: ModelConfig, req: InferRequest): void {
  const deliver = req.onResponse;
  if (!deliver) return;
  const batch = requestBatch(config, req);
  req.onResponse = (r: InferResponse | StatusError) => {
    if (req.signal?.aborted) return;
    if (r instanceof Error || r.streamEnd) return deliver(r);
    deliver(checkOutputs(config, r.outputs, [], batch) ?? r);
  };
}
