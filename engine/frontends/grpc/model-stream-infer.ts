// ModelStreamInfer: any number of requests on one bidirectional stream, each
// answered by one response (or, from a decoupled model, any number of them)
// in the order they come. The stream closed by the client (or its deadline)
// cancels every request still open on it.
//
// Back-pressure: a message written but not yet taken by HTTP/2 (the client
// stopped reading and its flow-control window is spent) waits in grpc-js.
// At most --stream-max-queued-bytes of them wait per stream; past that every
// open request of the stream is cancelled down to the model, the reason is
// logged, later responses are dropped, one error message says why, and the
// stream ends once its requests have ended (stream-queue-bound.ts).
//
// Triton's `triton_grpc_error: true` header (opt-in, set when the stream
// starts): the first error of any request ends the whole stream with that
// error's gRPC status (a model's error: INTERNAL with its message) instead
// of an error message inside the stream; the stream's other requests are
// cancelled and anything sent on it afterwards is ignored.
//
// --grpc-max-response-pool-size and the TRITONSERVER_DELAY_GRPC_RESPONSE
// test hook pace the writes (stream-response-pacer.ts).
import type * as grpc from '@grpc/grpc-js';
import type { ServerApi } from '../../api/server-api.ts';
import type { InferRequest, InferResponse } from '../../api/infer-request.ts';
import type { ModelInferRequest } from '../../../protocol/kserve-messages.ts';
import type { StreamInferRpc } from '../../../protocol/kserve-rpcs.ts';
import { capMessage, toStatusError } from '../../api/status.ts';
import { grpcFailure } from './model-infer-call.ts';
import { RequestCancel } from '../../api/cancel-signal.ts';
import { StreamQueueBound } from '../stream-queue-bound.ts';
import { toInferRequest, toInferResponse } from './grpc-tensors.ts';
import { pacingActive, StreamResponsePacer, type StreamPacing } from './stream-response-pacer.ts';

type Call = grpc.ServerDuplexStream<StreamInferRpc['req'], StreamInferRpc['res']>;
type ModelStreamInferResponse = StreamInferRpc['res'];

/** Bytes a message will take on the wire, near enough for the bound: its tensors' bytes plus a little. */
function messageBytes(m: ModelStreamInferResponse): number {
  let n = 256 + m.error_message.length;
  const res = m.infer_response;
  if (res && 'raw_output_contents' in res) for (const b of res.raw_output_contents ?? []) n += b.byteLength;
  return n;
}

/** The ModelStreamInfer handler over `api`; `maxQueuedBytes` bounds what waits for each stream's client. */
export function modelStreamInfer(
  api: ServerApi,
  maxQueuedBytes: number,
  traceparentOf: (md: grpc.Metadata) => string | undefined,
  pacing?: StreamPacing,
) {
  return (call: Call): void => {
    const stream = new InferStream(call, api, traceparentOf(call.metadata), maxQueuedBytes, pacing);
    // Queued requests leave their queue; a python model's request.is_cancelled() turns true.
    call.on('cancelled', () => stream.cancelled());
    call.on('close', () => stream.closed());
    call.on('data', (m: ModelInferRequest) => stream.request(m));
    call.on('end', () => stream.clientEnded());
  };
}

/**
 * One ModelStreamInfer stream. Owns the cancel signals of its open requests, the bound on what waits
 * for its client, and the pacer of its writes; event loop only. Our side ends once the client has
 * half-closed (or the bound overflowed) and every request has ended, or at the first error under
 * triton_grpc_error.
 */
class InferStream {
  private readonly pacer: StreamResponsePacer<ModelStreamInferResponse> | undefined;
  private readonly bound: StreamQueueBound;
  private readonly statusOnError: boolean;
  private readonly open = new Set<RequestCancel>();
  private pending = 0;
  private ended = false; // the client half-closed
  private finished = false; // our side ended
  private overflowNotice: ModelStreamInferResponse | undefined;

  constructor(
    private readonly call: Call,
    private readonly api: ServerApi,
    private readonly traceparent: string | undefined,
    maxQueuedBytes: number,
    pacing: StreamPacing | undefined,
  ) {
    this.pacer = pacingActive(pacing)
      ? new StreamResponsePacer<ModelStreamInferResponse>(pacing, (m, taken) => call.write(m, taken))
      : undefined;
    this.statusOnError = String(call.metadata.get('triton_grpc_error')[0] ?? '').toLowerCase() === 'true';
    this.bound = new StreamQueueBound(maxQueuedBytes, `ModelStreamInfer from ${peerOf(call)}`, (reason) => {
      this.cancelAll();
      this.overflowNotice = { error_message: reason, infer_response: undefined };
    });
  }

  /** One request from the client: run it, then write its response(s) or its error. */
  request(m: ModelInferRequest): void {
    if (this.finished) return; // the stream ended with an error status: later requests are not run
    this.pending++;
    const cancel = new RequestCancel();
    this.open.add(cancel);
    if (this.bound.overflowed) cancel.abort(); // a request sent after the bound was passed is not run
    const sent = { final: false }; // the model sent its final flag with a response: no empty final follows
    Promise.resolve()
      .then(() => this.api.infer(this.inferRequest(m, cancel, sent)))
      .then(
        (res) => this.lastResponse(m, res, sent.final),
        (err) => (this.statusOnError ? this.endWithStatus(err) : this.write(failure(m, err))),
      )
      .finally(() => {
        this.open.delete(cancel);
        this.pending--;
        this.maybeEnd();
      });
  }

  /** The client half-closed: our side ends once its requests have. */
  clientEnded(): void {
    this.ended = true;
    this.maybeEnd();
  }

  cancelled(): void {
    this.cancelAll();
    this.closed();
  }

  closed(): void {
    this.bound.close();
    this.pacer?.close();
  }

  /** The engine's request for `m`; a decoupled model's responses are written as they come (decoupled.ts). */
  private inferRequest(m: ModelInferRequest, cancel: RequestCancel, sent: { final: boolean }): InferRequest {
    const req = toInferRequest(m);
    req.signal = cancel;
    req.arrivalNs = process.hrtime.bigint();
    req.onResponse = (r) => {
      if (r instanceof Error) {
        if (this.statusOnError) return this.endWithStatus(r);
        return this.write({ error_message: r.message, infer_response: { model_name: m.model_name, id: m.id } });
      }
      sent.final ||= r.final === true;
      // As Triton: each streamed response says whether it is its request's last.
      const params = { ...r.parameters, triton_final_response: r.final === true };
      this.write({ error_message: '', infer_response: toInferResponse({ ...r, parameters: params }) });
    };
    req.traceparent = this.traceparent;
    return req;
  }

  /** What api.infer resolved with: the response, or a decoupled request's end of stream. */
  private lastResponse(m: ModelInferRequest, res: InferResponse, finalSent: boolean): void {
    // Triton's opt-in: an empty response marked final closes each decoupled request's stream.
    if (res.streamEnd && (finalSent || !m.parameters?.triton_enable_empty_final_response?.bool_param)) return;
    if (res.streamEnd) res.parameters = { ...res.parameters, triton_final_response: true };
    this.write({ error_message: '', infer_response: toInferResponse(res) });
  }

  private send(m: ModelStreamInferResponse, taken?: () => void): void {
    if (this.pacer) this.pacer.push(m, taken ?? (() => undefined));
    else this.call.write(m, taken);
  }

  /** Past the bound (or on the notice itself), nothing more is queued but that one notice. */
  private write(m: ModelStreamInferResponse): void {
    if (this.finished) return;
    const bytes = messageBytes(m);
    if (!this.bound.add(bytes)) {
      const notice = this.overflowNotice;
      this.overflowNotice = undefined;
      if (notice)
        this.send({ ...notice, infer_response: { model_name: m.infer_response?.model_name ?? '', id: m.infer_response?.id ?? '' } });
      return;
    }
    this.send(m, () => this.bound.taken(bytes));
  }

  private cancelAll(): void {
    for (const c of [...this.open]) c.abort();
    this.open.clear();
  }

  /** triton_grpc_error: the first error ends the stream with its status (grpc-js sends it once queued writes are out). */
  private endWithStatus(err: unknown): void {
    if (this.finished) return;
    this.finished = true;
    this.cancelAll();
    const { code, details } = grpcFailure(err);
    this.call.emit('error', { code, details });
  }

  private maybeEnd(): void {
    if (this.finished || this.pending > 0 || !(this.ended || this.bound.overflowed)) return;
    this.finished = true;
    // Responses the pacer still holds go first.
    if (this.pacer) this.pacer.whenIdle(() => this.call.end());
    else this.call.end();
  }
}

/** The in-stream error message for a request that failed. */
function failure(m: ModelInferRequest, err: unknown): ModelStreamInferResponse {
  return { error_message: capMessage(toStatusError(err).message), infer_response: { model_name: m.model_name, id: m.id } };
}

function peerOf(call: Call): string {
  try {
    return call.getPeer();
  } catch {
    return 'a closed stream'; // no peer once the stream closed: the log line says so
  }
}
