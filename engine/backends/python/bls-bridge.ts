// Business Logic Scripting: a stub's `bls` frame becomes an engine request
// run through BackendContext.infer (any model: ONNX, js, ensemble, python),
// and its answer goes back as a `bls_reply` frame. Large outputs travel in a
// new shm object the stub unlinks after reading.
import type { BackendContext } from '../../api/backend.ts';
import type { InferRequest } from '../../api/infer-request.ts';
import { toStatusError } from '../../api/status.ts';
import type { BlsReplyBody, StubFrameOf } from './stub-frames.ts';
import { decodeFromStub, encodeOwned } from './tensor-transfer.ts';

/** Run the BLS request in `m`; `reply` gets {outputs} or {error, code}. `nextKey` names a fresh shm object. */
export function serveBls(m: StubFrameOf<'bls'>, ctx: BackendContext, prefix: string, nextKey: () => string, reply: (body: BlsReplyBody) => void): void {
  const fail = (err: unknown) => {
    const se = toStatusError(err);
    reply({ error: se.message, code: se.code });
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
  } catch (err) {
    fail(err);
    return;
  }
  ctx.infer(req).then((res) => {
    try {
      reply({ outputs: encodeOwned(res.outputs, nextKey()) });
    } catch (err) {
      fail(err);
    }
  }, fail);
}
