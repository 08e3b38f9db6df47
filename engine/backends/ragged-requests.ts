// Ragged batching for the backends that hand a model its batch as separate
// requests (js, python), on the onnxruntime backend's code
// (onnxruntime/ragged-batch.ts): every request of a batch carries the batch's
// `batch_input` tensors, built once over the whole batch, so a model that
// concatenates its requests' ragged inputs knows where each one's elements
// are; a `batch_output` the model returns once, with the batch's first
// request, is the whole batch's and is scattered back to every request by
// its source input's shape, as Triton's output responder does. Pure; one
// call per batch.
import type { InferRequest, InferResponse, Tensor } from '../api/infer-request.ts';
import type { ModelConfig } from '../api/model-config.ts';
import { StatusError, toStatusError } from '../api/status.ts';
import { batchInputTensors, batchOutputSources, scatterBatchOutput } from './onnxruntime/ragged-batch.ts';

/** The batch input tensors every request of `requests` gets (none when the config names none or the model does not batch). */
export function requestBatchInputs(config: ModelConfig, requests: InferRequest[]): Tensor[] {
  if (!config.batch_input?.length || config.max_batch_size <= 0) return [];
  return batchInputTensors(config, requests);
}

/** The batch output targets of the model: kept past a backend's requested-outputs filter until scattered. */
export function batchOutputTargets(config: ModelConfig): ReadonlySet<string> {
  if (!config.batch_output?.length) return EMPTY;
  return new Set(batchOutputSources(config).keys());
}
const EMPTY: ReadonlySet<string> = new Set();

type Outcome = InferResponse | StatusError;

/**
 * Scatter each batch output target of a batch's `outcomes` (one per request,
 * in order): the target's tensor in the first response carrying it is the
 * whole batch's; every response gets its share in place of its own copy,
 * when its request asked for the output (or for every output). A tensor too
 * small for the batch fails every request of it, naming the output.
 */
export function scatterRequestOutputs(config: ModelConfig, requests: InferRequest[], outcomes: Outcome[]): Outcome[] {
  if (!config.batch_output?.length || config.max_batch_size <= 0) return outcomes;
  let out = outcomes;
  for (const [target, source] of batchOutputSources(config)) {
    const whole = firstTensor(out, target);
    let shares: Tensor[];
    try {
      shares = whole ? scatterBatchOutput(config, whole, source, requests) : [];
    } catch (err) {
      const e = toStatusError(err);
      return out.map((o) => (o instanceof StatusError ? o : e));
    }
    out = out.map((o, i) => {
      if (o instanceof StatusError) return o;
      const wants = requests[i]!.outputs.length === 0 || requests[i]!.outputs.some((x) => x.name === target);
      const rest = o.outputs.filter((t) => t.name !== target);
      const share = shares[i];
      return { ...o, outputs: wants && share ? [...rest, share] : rest };
    });
  }
  return out;
}

function firstTensor(outcomes: Outcome[], name: string): Tensor | undefined {
  for (const o of outcomes) {
    if (o instanceof StatusError) continue;
    const t = o.outputs.find((x) => x.name === name);
    if (t) return t;
  }
  return undefined;
}
