// Unary ModelInfer straight on node:http2, beside grpc-js.
//
// Why: grpc-js's server costs ~0.1 ms of CPU per call before any handler
// runs (its intercepting call, metadata objects, read queue, status
// plumbing), measured with a pass-through handler (test/bench/floor-server.ts):
// about 0.035 ms more than node:http2 itself answering the same unary call.
// On a small model that is a fifth of the engine's whole CPU per inference,
// and ModelInfer is the one RPC that carries the load.
//
// What: grpc-js keeps its http2 servers, sessions, settings, keepalive and
// shutdown. A plain unary ModelInfer (POST, application/grpc, no
// compression) is answered here, with grpc-js's wire behaviour (headers, one
// length-prefixed message, trailers; a trailers-only answer on error;
// grpc-timeout; its message-size limits and texts); every other stream goes
// to grpc-js untouched. The routing is one of the reaches into grpc-js
// (grpc-js-internals.ts), off with the others if grpc-js changed shape (then
// grpc-js serves every call, as before; the differential tests also turn it
// off alone, transport-options.ts grpcDirectInfer). The port's own HTTP/2
// front (grpc-h2-front.ts) answers with the same DirectInferCall on its streams.
import type { ServerHttp2Stream } from 'node:http2';
import type { ServerApi } from '../../api/server-api.ts';
import { RequestCancel } from '../../api/cancel-signal.ts';
import { take } from './receive-pool.ts';
import { log } from '../../../common/logger.ts';
import { grpcFailure, modelInferCall } from './model-infer-call.ts';
import type { StreamRoute } from './grpc-js-internals.ts';
import {
  endWithMessage,
  messagePrefix,
  PREFIX_BYTES,
  READ_OK,
  READ_TOO_LARGE,
  UnaryMessageReader,
} from '../../../protocol/grpc-framing.ts';
import { encodeGrpcMessage, GrpcStatus, GrpcText } from '../../../protocol/grpc-status.ts';
import { parseGrpcTimeout } from '../../../protocol/grpc-timeout.ts';
import type { ModelInferRequest, ModelInferResponse } from '../../../protocol/kserve-messages.ts';

export const MODEL_INFER_PATH = '/inference.GRPCInferenceService/ModelInfer';

export interface DirectInferOptions {
  /** grpc.max_receive_message_length / max_send_message_length (-1: no limit). */
  maxReceiveBytes: number;
  maxSendBytes: number;
  /** ModelInfer's protobuf codec (the same functions grpc-js is given). */
  decode: (b: Buffer) => ModelInferRequest;
  encode: (m: ModelInferResponse<Uint8Array>) => Buffer;
}

/** The headers grpc-js answers a call with (so clients see the same server), and those of its trailers-only answers. */
export const RESPONSE_HEADERS = {
  ':status': 200,
  'content-type': 'application/grpc+proto',
  'grpc-accept-encoding': 'identity,deflate,gzip',
  'grpc-encoding': 'identity',
} as const;
export const TRAILERS_ONLY_HEADERS = { ':status': 200, 'content-type': 'application/grpc+proto' } as const;
export const OK_TRAILERS = { 'grpc-status': GrpcStatus.OK, 'grpc-message': GrpcText.OK } as const;

/** Request headers as either HTTP/2 server gives them. */
type Headers = Record<string, string | string[] | undefined>;

/** True for a stream this path answers: the rest goes to grpc-js. */
export function isDirectInfer(headers: Headers): boolean {
  if (headers[':path'] !== MODEL_INFER_PATH || headers[':method'] !== 'POST') return false;
  const type = headers['content-type'];
  const enc = headers['grpc-encoding'];
  return typeof type === 'string' && type.startsWith('application/grpc') && (enc === undefined || enc === 'identity');
}

/** How a direct call answers on its stream: node:http2's (below) or the engine's own (grpc-h2-front.ts). */
export interface UnaryAnswer {
  /** Headers, the one message (serialized, unprefixed), OK trailers. */
  ok(message: Buffer): void;
  /** A trailers-only answer carrying `code` and `details`. */
  fail(code: number, details: string): void;
  /** The stream closed already (nothing can be sent). */
  gone(): boolean;
}

/** The direct path as a route in front of grpc-js on node:http2 (grpc-js-internals.ts; grpc-server.ts decides whether it is on). */
export function directInferRoute(api: ServerApi, opts: DirectInferOptions): StreamRoute {
  return {
    accepts: isDirectInfer,
    serve: (stream, headers) => {
      // Errors on the stream always come with a 'close' (handled there); this only keeps them from being uncaught.
      stream.on('error', ignore);
      const call = new DirectInferCall(headers, api, opts, new NodeStreamAnswer(stream));
      stream.once('close', () => call.onClose());
      if (call.done) return;
      stream.on('data', (chunk: Buffer) => call.onData(chunk));
      stream.once('end', () => call.onEnd());
    },
  };
}

/** Answers on a node:http2 stream, with grpc-js's wire shapes. */
class NodeStreamAnswer implements UnaryAnswer {
  constructor(private readonly stream: ServerHttp2Stream) {}

  gone(): boolean {
    return this.stream.destroyed || this.stream.closed;
  }

  fail(code: number, details: string): void {
    this.stream.respond({ ...TRAILERS_ONLY_HEADERS, 'grpc-status': code, 'grpc-message': encodeGrpcMessage(details) }, { endStream: true });
    this.stream.resume(); // drop any body still arriving
  }

  ok(message: Buffer): void {
    const stream = this.stream;
    stream.respond(RESPONSE_HEADERS, { waitForTrailers: true });
    stream.once('wantTrailers', () => stream.sendTrailers(OK_TRAILERS));
    endWithMessage(stream, messagePrefix(message.length), message);
  }
}

/**
 * One unary ModelInfer: read one message, run it, answer it. The transport
 * feeds onData / onEnd / onClose. A class rather than closures: per call it
 * allocates one object, and its methods are not re-created (nor renamed by
 * tsx's keepNames) per request.
 */
export class DirectInferCall {
  private readonly signal = new RequestCancel();
  private readonly reader: UnaryMessageReader;
  private answered = false;
  private deadline: NodeJS.Timeout | undefined;

  constructor(
    private readonly headers: Headers,
    private readonly api: ServerApi,
    private readonly opts: DirectInferOptions,
    private readonly out: UnaryAnswer,
  ) {
    this.reader = new UnaryMessageReader(opts.maxReceiveBytes, take);
    const timeout = headers['grpc-timeout'];
    if (timeout !== undefined) this.startDeadline(String(timeout));
  }

  /** Answered already (an invalid grpc-timeout): the transport need not feed the request. */
  get done(): boolean {
    return this.answered;
  }

  private startDeadline(value: string): void {
    const ms = parseGrpcTimeout(value);
    if (ms === undefined) return this.answer(GrpcStatus.INTERNAL, GrpcText.invalidTimeout(value));
    this.deadline = setTimeout(() => {
      this.answer(GrpcStatus.DEADLINE_EXCEEDED, GrpcText.DEADLINE_EXCEEDED);
      this.signal.abort();
    }, ms);
  }

  onClose(): void {
    if (this.deadline) clearTimeout(this.deadline);
    if (this.answered) return;
    this.answered = true;
    this.signal.abort(); // the client went away before the answer
  }

  onData(chunk: Buffer): void {
    if (this.answered) return;
    const r = this.reader.write(chunk);
    if (r === READ_OK) return;
    if (r === READ_TOO_LARGE)
      this.answer(GrpcStatus.RESOURCE_EXHAUSTED, GrpcText.receivedTooLarge(this.reader.oversize, this.opts.maxReceiveBytes));
    else this.answer(GrpcStatus.UNIMPLEMENTED, GrpcText.secondRequestMessage(MODEL_INFER_PATH));
  }

  onEnd(): void {
    if (this.answered) return;
    const received = this.reader.message;
    if (!received) return this.answer(GrpcStatus.UNIMPLEMENTED, GrpcText.noRequestMessage(MODEL_INFER_PATH));
    let msg: ModelInferRequest;
    try {
      msg = this.opts.decode(received.subarray(PREFIX_BYTES));
    } catch {
      // grpc-js answers an undecodable message with this status and text, without the parser's detail
      return this.answer(GrpcStatus.INTERNAL, GrpcText.DESERIALIZE_REQUEST);
    }
    const tp = this.headers.traceparent;
    const pooled = this.reader.messageInPlace ? undefined : received;
    modelInferCall(this.api, msg, pooled, Array.isArray(tp) ? tp[0] : tp, this.signal, (err, res) => this.onResult(err, res));
  }

  /** Serialize now: the request's tensors (and the pooled buffer) are given back right after this returns. */
  private onResult(err: unknown, res: ModelInferResponse<Uint8Array> | undefined): void {
    if (!res) {
      const f = grpcFailure(err);
      return this.answer(f.code, f.details);
    }
    let body: Buffer;
    try {
      body = this.opts.encode(res);
    } catch (e) {
      log.error('ModelInfer: serializing the response failed', e);
      return this.answer(GrpcStatus.INTERNAL, GrpcText.SERIALIZE_RESPONSE);
    }
    if (this.opts.maxSendBytes !== -1 && body.length > this.opts.maxSendBytes) {
      return this.answer(GrpcStatus.RESOURCE_EXHAUSTED, GrpcText.sentTooLarge(body.length + PREFIX_BYTES, this.opts.maxSendBytes));
    }
    this.answer(GrpcStatus.OK, GrpcText.OK, body);
  }

  /** The one exit: `message` then OK trailers, or a trailers-only answer carrying `code` (grpc-js's shapes). */
  private answer(code: number, details: string, message?: Buffer): void {
    if (this.answered) return;
    this.answered = true;
    if (this.deadline) clearTimeout(this.deadline);
    if (this.out.gone()) return;
    if (message === undefined) this.out.fail(code, details);
    else this.out.ok(message);
  }
}

const ignore = () => undefined;
