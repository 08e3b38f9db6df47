// Triton's HandleInfer for POST /v2/models/{m}[/versions/{v}]/infer, once:
// the Hono route (routes-infer.ts) and the direct node:http path
// (direct-infer.ts) differ only in how they read the body and write the
// reply, so the two cannot drift.
import type { CancelSignal } from '../../api/cancel-signal.ts';
import { DECOUPLED_HTTP_MESSAGE } from '../../api/decoupled.ts';
import { release } from '../grpc/receive-pool.ts';
import type { ServerApi } from '../../api/server-api.ts';
import { encodeInferResponse, parseInferRequest } from './infer-json.ts';

/** What an infer call carries besides its body, as the transport found it. */
export interface InferCall {
  /** Percent-decoded, as Hono's param() gives it. */
  model: string;
  /** The /versions/{v} segment; undefined (or '') when absent. */
  version: string | undefined;
  /** The Inference-Header-Content-Length header (binary tensor data extension). */
  headerLength: string | undefined;
  traceparent: string | undefined;
  signal: CancelSignal;
  /** When the request arrived, before its body was read. */
  arrivalNs: bigint;
}

/** The reply body; `headerLength` is set when binary outputs follow the JSON. */
export interface InferReply {
  body: Buffer;
  headerLength?: number;
}

/** Parse, submit, encode; throws a StatusError for the transport's one error reply. Releases `body`. */
export async function handleInfer(api: ServerApi, body: Buffer, call: InferCall): Promise<InferReply> {
  try {
    const { request, binaryOutputDefault } = parseInferRequest(body, call.headerLength, call.model, call.version);
    request.arrivalNs = call.arrivalNs;
    request.signal = call.signal;
    request.unaryOnly = DECOUPLED_HTTP_MESSAGE;
    request.traceparent = call.traceparent;
    const response = await api.infer(request);
    return encodeInferResponse(response, request.outputs, binaryOutputDefault);
  } finally {
    // The inputs are views of the body: once the inference has settled and
    // the reply is encoded (outputs copied into it), nothing reads them.
    release(body);
  }
}
