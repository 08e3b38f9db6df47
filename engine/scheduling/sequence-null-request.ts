// Triton's null request (InferenceRequest::CopyAsNull): what fills an idle
// batch slot of the direct strategy. It has the batch's first request's
// inputs with artificial contents (zeros; a BYTES input keeps its bytes so
// its elements stay well formed), READY false, START and END false, CORRID
// 0, a state input at its initial value (never a sequence's real state), and
// asks for the same outputs. Its answer is dropped; it counts in the batch
// size of the execution statistics, not in the inference count.
import type { InferRequest } from '../api/infer-request.ts';
import { withSequenceInputs, type SequenceSpec } from '../config/sequence-config.ts';

export function nullRequest(like: InferRequest, spec: SequenceSpec, batched: boolean, allOutputs: string[]): InferRequest {
  const base: InferRequest = {
    modelName: like.modelName,
    modelVersion: like.modelVersion,
    inputs: like.inputs.map((t) => ({
      name: t.name,
      datatype: t.datatype,
      shape: [...t.shape],
      data: t.datatype === 'BYTES' ? Uint8Array.from(t.data) : new Uint8Array(t.data.byteLength),
    })),
    outputs: like.outputs.map((o) => ({ name: o.name })),
    parameters: {},
  };
  return withSequenceInputs(base, spec, { id: 0n, start: false, end: false }, undefined, batched, allOutputs, false);
}
