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
    const pacer = pacingActive(pacing)
      ? new StreamResponsePacer<ModelStreamInferResponse>(pacing, (m, taken) => call.write(m, taken))
      : undefined;
    const send = (m: ModelStreamInferResponse, taken?: () => void): void => {
      if (pacer) pacer.push(m, taken ?? (() => undefined));
      else call.write(m, taken);
    };
    const statusOnError = String(call.metadata.get('triton_grpc_error')[0] ?? '').toLowerCase() === 'true';
    let pending = 0;
    let ended = false; // the client half-closed
    let finished = false; // our side ended
    const open = new Set<RequestCancel>();
    const cancelAll = () => {
      for (const c of [...open]) c.abort();
      open.clear();
    };
    let overflowNotice: ModelStreamInferResponse | undefined;
    const bound = new StreamQueueBound(maxQueuedBytes, `ModelStreamInfer from ${peerOf(call)}`, (reason) => {
      cancelAll();
      overflowNotice = { error_message: reason, infer_response: undefined };
    });
    // Past the bound (or on the notice itself), nothing more is queued but that one notice.
    const write = (m: ModelStreamInferResponse): void => {
      if (finished) return;
      const bytes = messageBytes(m);
      if (!bound.add(bytes)) {
        const notice = overflowNotice;
        overflowNotice = undefined;
        if (notice) send({ ...notice, infer_response: { model_name: m.infer_response?.model_name ?? '', id: m.infer_response?.id ?? '' } });
        return;
      }
      send(m, () => bound.taken(bytes));
    };
    // triton_grpc_error: the first error ends the stream with its status (grpc-js sends it once queued writes are out).
    const endWithStatus = (err: unknown): void => {
      if (finished) return;
      finished = true;
      cancelAll();
      const { code, details } = grpcFailure(err);
      call.emit('error', { code, details });
    };
    const maybeEnd = () => {
      if (finished || pending > 0 || !(ended || bound.overflowed)) return;
      finished = true;
      // Responses the pacer still holds go first.
      if (pacer) pacer.whenIdle(() => call.end());
      else call.end();
    };
    // Queued requests leave their queue; a python model's request.is_cancelled() turns true.
    call.on('cancelled', () => {
      cancelAll();
      bound.close();
      pacer?.close();
    });
    call.on('close', () => {
      bound.close();
      pacer?.close();
    });
    call.on('data', (m: ModelInferRequest) => {
      if (finished) return; // the stream ended with an error status: later requests are not run
      pending++;
      const cancel = new RequestCancel();
      open.add(cancel);
      if (bound.overflowed) cancel.abort(); // a request sent after the bound was passed is not run
      let finalSent = false; // the model sent its final flag with a response: no empty final follows
      const failure = (err: unknown) => ({
        error_message: capMessage(toStatusError(err).message),
        infer_response: { model_name: m.model_name, id: m.id },
      });
      Promise.resolve()
        .then(() => {
          const req = toInferRequest(m);
          req.signal = cancel;
          req.arrivalNs = process.hrtime.bigint();
          // A decoupled model's responses are written as they come (decoupled.ts).
          req.onResponse = (r) => {
            if (r instanceof Error) {
              if (statusOnError) return endWithStatus(r);
              return write({ error_message: r.message, infer_response: { model_name: m.model_name, id: m.id } });
            }
            finalSent ||= r.final === true;
            // As Triton: each streamed response says whether it is its request's last.
            const params = { ...r.parameters, triton_final_response: r.final === true };
            write({ error_message: '', infer_response: toInferResponse({ ...r, parameters: params }) });
          };
          req.traceparent = traceparentOf(call.metadata);
          return api.infer(req);
        })
        .then(
          (res) => {
            // Triton's opt-in: an empty response marked final closes each decoupled request's stream.
            if (res.streamEnd && (finalSent || !m.parameters?.triton_enable_empty_final_response?.bool_param)) return;
            if (res.streamEnd) res.parameters = { ...res.parameters, triton_final_response: true };
            write({ error_message: '', infer_response: toInferResponse(res) });
          },
          (err) => (statusOnError ? endWithStatus(err) : write(failure(err))),
        )
        .finally(() => {
          open.delete(cancel);
          pending--;
          maybeEnd();
        });
    });
    call.on('end', () => {
      ended = true;
      maybeEnd();
    });
  };
}

function peerOf(call: Call): string {
  try {
    return call.getPeer();
  } catch {
    return 'a closed stream'; // no peer once the stream closed: the log line says so
  }
}
