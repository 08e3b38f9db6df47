// The `exec` frame a python instance sends for a batch, and a stub's response
// frame turned into the request's outcome. Pure but for reading the output
// tensors the stub left in shm.
import type { BackendContext } from '../../api/backend.ts';
import type { InferRequest, InferResponse, ParamValue } from '../../api/infer-request.ts';
import { StatusError, internal, isStatusCode, toStatusError, type StatusCode } from '../../api/status.ts';
import { decodeFromStub, type WireTensor } from './tensor-transfer.ts';
import type { EngineFrame, ResponseBody } from './stub-frames.ts';
import { batchOutputTargets } from '../ragged-requests.ts';
import { isDecoupled } from '../../api/decoupled.ts';

/** What one request of a batch comes to: its response, or its error. */
export type Outcome = InferResponse | StatusError;

type Ctx = Pick<BackendContext, 'modelName' | 'version' | 'config'>;

/** The outputs a request gets: the requested ones, or all the model's. */
const wanted = (ctx: Ctx, r: InferRequest) => (r.outputs.length ? r.outputs.map((o) => o.name) : ctx.config.output.map((o) => o.name));

/** The `exec` frame of batch `seq`; `wire` holds each request's inputs as encoded into the instance's arena. */
export function execFrame(seq: number, ctx: Ctx, requests: InferRequest[], wire: WireTensor[][]): EngineFrame {
  return {
    t: 'exec',
    seq,
    model: ctx.modelName,
    requests: requests.map((r, i) => ({
      id: r.id ?? '',
      correlation_id: jsonParam(r.parameters.sequence_id ?? 0),
      parameters: jsonParams(r.parameters),
      outputs: wanted(ctx, r),
      inputs: wire[i]!,
    })),
  };
}

/** The outcome of `req` from its response frame `f` (undefined: the model gave none): the wanted outputs, or the model's error. */
export function frameOutcome(ctx: Ctx, prefix: string, req: InferRequest, f: ResponseBody | undefined): Outcome {
  if (!f) return internal(`python model '${ctx.modelName}' returned no response for a request`);
  if (f.error) {
    const code: StatusCode = isStatusCode(f.error.code) ? f.error.code : 'INTERNAL';
    return new StatusError(code, String(f.error.message));
  }
  try {
    const tensors = decodeFromStub(f.outputs ?? [], prefix);
    // batch_output targets pass whatever was asked: the batch's first response carries the whole batch's (ragged-requests.ts).
    const keep = new Set([...wanted(ctx, req), ...(isDecoupled(ctx.config) ? [] : batchOutputTargets(ctx.config))]);
    const outputs = [...keep].flatMap((n) => tensors.filter((t) => t.name === n));
    const res: InferResponse = { modelName: ctx.modelName, modelVersion: String(ctx.version), id: req.id, outputs };
    const params = fromJsonParams(f.parameters);
    if (params) res.parameters = params;
    return res;
  } catch (err) {
    return toStatusError(err);
  }
}

/** A decoupled request's end of stream. */
export function streamEnd(ctx: Ctx, req: InferRequest): InferResponse {
  return { modelName: ctx.modelName, modelVersion: String(ctx.version), id: req.id, outputs: [], streamEnd: true };
}

function jsonParam(v: ParamValue): string | number | boolean {
  return typeof v === 'bigint' ? (v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v.toString()) : v;
}

function jsonParams(p: Record<string, ParamValue>): Record<string, string | number | boolean> {
  return Object.fromEntries(Object.entries(p).map(([k, v]) => [k, jsonParam(v)]));
}

/**
 * A response's parameters as the stub sent them (an int64 outside JSON's
 * exact range comes as its decimal text under `{int64}`), or undefined for none.
 */
export function fromJsonParams(p: Record<string, unknown> | undefined): Record<string, ParamValue> | undefined {
  if (!p || typeof p !== 'object') return undefined;
  const out: Record<string, ParamValue> = {};
  for (const [k, v] of Object.entries(p)) {
    if (typeof v === 'boolean' || typeof v === 'number' || typeof v === 'string') out[k] = v;
    else if (v && typeof v === 'object' && typeof (v as { int64?: unknown }).int64 === 'string')
      out[k] = BigInt((v as { int64: string }).int64);
  }
  return Object.keys(out).length ? out : undefined;
}
