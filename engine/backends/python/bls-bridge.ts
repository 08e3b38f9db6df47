// Business Logic Scripting: a stub's `bls` frame becomes an engine request
// run through BackendContext.infer (any model: ONNX, js, ensemble, python),
// and its answer goes back as `bls_reply` frames: one for exec(), one per
// response for exec(decoupled=True), the last flagged final (an empty
// response when the model closed its stream with the flag alone, as in
// Triton). Large outputs travel in a new shm object the stub unlinks after
// reading.
import type { BackendContext } from '../../api/backend.ts';
import type { InferRequest, InferResponse, ParamValue } from '../../api/infer-request.ts';
import { type StatusError, internal, toStatusError } from '../../api/status.ts';
import type { BlsReplyBody, ParamJson, StubFrameOf } from './stub-frames.ts';
import { decodeFromStub, encodeOwned } from './tensor-transfer.ts';
import { RequestCancel } from '../../api/cancel-signal.ts';

const FINAL = 1;

/** Triton's refusal of a plain exec() on a decoupled model (its text, trailing quote included). */
export function blsNeedsDecoupled(model: string): string {
  return (
    `Model ${model} is using the decoupled. The current BLS request call doesn't support models using the decoupled ` +
    `transaction policy. Please use 'decoupled=True' argument to the 'exec' or 'async_exec' calls for decoupled models.'`
  );
}

/**
 * Run the BLS request in `m`; `reply` gets {outputs} or {error, code} (with
 * flags for a decoupled call). `nextKey` names a fresh shm object; `cancels`
 * holds the call's cancellation while it runs (the stub's `bls_cancel`).
 */
export function serveBls(
  m: StubFrameOf<'bls'>,
  ctx: BackendContext,
  prefix: string,
  nextKey: () => string,
  reply: (body: BlsReplyBody) => void,
  cancels: Map<number, RequestCancel>,
): void {
  const decoupled = m.decoupled === true;
  const fail = (err: unknown, flags?: number) => {
    let se = toStatusError(err);
    // Triton checks the model is ready before a BLS call and answers in its own words.
    if (se.code === 'NOT_FOUND') se = internal(`Failed for execute the inference request. Model '${String(m.model)}' is not ready.`);
    reply(decoupled ? { error: se.message, code: se.code, flags } : { error: se.message, code: se.code });
  };
  const answer = (res: InferResponse, flags?: number) => {
    try {
      const body: BlsReplyBody = { outputs: encodeOwned(res.outputs, nextKey()) };
      const params = toJsonParams(res.parameters);
      if (params) body.parameters = params;
      if (decoupled) body.flags = flags;
      reply(body);
    } catch (err) {
      fail(err, flags);
    }
  };
  let req: InferRequest;
  try {
    req = {
      modelName: String(m.model),
      modelVersion: Number(m.version) > 0 ? String(m.version) : '',
      id: m.id || undefined,
      inputs: decodeFromStub(m.inputs ?? [], prefix),
      outputs: (m.outputs ?? []).map((name) => ({ name })),
      parameters: m.parameters ?? {},
    };
    if (m.timeout && m.timeout > 0) req.timeoutUs = m.timeout;
  } catch (err) {
    fail(err, FINAL);
    return;
  }
  const cancel = new RequestCancel();
  req.signal = cancel;
  cancels.set(m.bid, cancel);
  const settled = () => cancels.delete(m.bid);
  if (!decoupled) {
    req.unaryOnly = blsNeedsDecoupled(req.modelName);
    ctx
      .infer(req)
      .then(
        (res) => answer(res),
        (err: unknown) => fail(err),
      )
      .finally(settled);
    return;
  }
  // Every response as it comes; the promise settles once the stream ended.
  let ended = false;
  req.onResponse = (r: InferResponse | StatusError) => {
    if (ended) return;
    if (r instanceof Error) return fail(r, 0);
    ended = r.final === true;
    answer(r, ended ? FINAL : 0);
  };
  ctx
    .infer(req)
    .then(
      (res) => {
        if (ended) return;
        ended = true;
        answer(res.streamEnd ? { ...res, outputs: [], parameters: undefined } : res, FINAL);
      },
      (err: unknown) => {
        if (!ended) fail(err, FINAL);
        ended = true;
      },
    )
    .finally(settled);
}

function toJsonParams(p: Record<string, ParamValue> | undefined): Record<string, ParamJson> | undefined {
  if (!p) return undefined;
  const entries = Object.entries(p).filter(([k]) => k !== 'triton_final_response');
  if (!entries.length) return undefined;
  return Object.fromEntries(entries.map(([k, v]) => [k, typeof v === 'bigint' ? { int64: v.toString() } : v]));
}
