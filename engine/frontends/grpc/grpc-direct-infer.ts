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
// shutdown. We take its one 'stream' listener off each of its http2 servers
// and put ours in front: a plain unary ModelInfer (POST, application/grpc,
// no compression) is answered here, with grpc-js's wire behaviour (headers,
// one length-prefixed message, trailers; a trailers-only answer on error;
// grpc-timeout; its message-size limits and texts); every other stream goes
// to grpc-js's listener untouched. The installer checks grpc-js's shape
// first and stays off, logging why, if a grpc-js update changed it;
// ENGINE_GRPC_DIRECT_INFER=0 turns it off too (then grpc-js serves every
// call, as before).
import type { Http2Server, IncomingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import type * as grpc from '@grpc/grpc-js';
import type { ServerApi } from '../../api/server-api.ts';
import { RequestCancel } from '../../api/cancel-signal.ts';
import { take } from './receive-pool.ts';
import { log } from '../../../common/logger.ts';
import { grpcFailure, modelInferCall } from './model-infer-call.ts';

export const MODEL_INFER_PATH = '/inference.GRPCInferenceService/ModelInfer';

type Msg = Record<string, any>;
type StreamListener = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number) => void;

interface GrpcServerInternals {
  http2Servers?: Map<Http2Server, unknown>;
  onStreamOpened?: (stream: ServerHttp2Stream) => void;
}

export interface DirectInferOptions {
  /** grpc.max_receive_message_length / max_send_message_length (-1: no limit). */
  maxReceiveBytes: number;
  maxSendBytes: number;
  /** ModelInfer's protobuf codec (the same functions grpc-js is given). */
  decode: (b: Buffer) => Msg;
  encode: (m: Msg) => Buffer;
}

// grpc-js's status codes used here.
const OK = 0;
const DEADLINE_EXCEEDED = 4;
const RESOURCE_EXHAUSTED = 8;
const UNIMPLEMENTED = 12;
const INTERNAL = 13;

/** The headers grpc-js answers a call with (so clients see the same server), and those of its trailers-only answers. */
const RESPONSE_HEADERS = {
  ':status': 200,
  'content-type': 'application/grpc+proto',
  'grpc-accept-encoding': 'identity,deflate,gzip',
  'grpc-encoding': 'identity',
} as const;
const TRAILERS_ONLY_HEADERS = { ':status': 200, 'content-type': 'application/grpc+proto' } as const;
const TIMEOUT = /^(\d{1,8})([HMSmun])$/;
const TIMEOUT_UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 0.001, n: 0.000001 };

/** True for a stream this path answers: the rest goes to grpc-js. */
export function isDirectInfer(headers: IncomingHttpHeaders): boolean {
  if (headers[':path'] !== MODEL_INFER_PATH || headers[':method'] !== 'POST') return false;
  const type = headers['content-type'];
  const enc = headers['grpc-encoding'];
  return typeof type === 'string' && type.startsWith('application/grpc') && (enc === undefined || enc === 'identity');
}

/**
 * Put the direct path in front of grpc-js's stream listener on every http2
 * server `server` has bound (call after the last bindAsync). False, with a
 * log line, when grpc-js is not the shape this was written for.
 */
export function installDirectInfer(server: grpc.Server, api: ServerApi, opts: DirectInferOptions): boolean {
  if (process.env.ENGINE_GRPC_DIRECT_INFER === '0') return false;
  const s = server as unknown as GrpcServerInternals;
  const servers = s.http2Servers;
  const opened = typeof s.onStreamOpened === 'function' ? s.onStreamOpened.bind(server) : undefined;
  if (!(servers instanceof Map) || servers.size === 0 || !opened) {
    log.info('grpc-js Server has changed shape: ModelInfer is served by grpc-js (no direct path)');
    return false;
  }
  for (const h2 of servers.keys()) {
    if (typeof h2?.listeners !== 'function' || h2.listeners('stream').length !== 1) {
      log.info('grpc-js http2 server does not have exactly one stream listener: ModelInfer is served by grpc-js (no direct path)');
      return false;
    }
  }
  for (const h2 of servers.keys()) {
    const grpcJs = h2.listeners('stream')[0] as StreamListener;
    h2.removeListener('stream', grpcJs);
    h2.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number) => {
      if (!isDirectInfer(headers)) return grpcJs.call(h2, stream, headers, flags);
      opened(stream); // grpc-js's idle-connection accounting
      new DirectInferCall(stream, headers, api, opts);
    });
  }
  return true;
}

/**
 * One unary ModelInfer on `stream`: read one message, run it, answer it.
 * A class rather than closures: per call it allocates one object, and its
 * methods are not re-created (nor renamed by tsx's keepNames) per request.
 */
class DirectInferCall {
  private readonly signal = new RequestCancel();
  private readonly reader: MessageReader;
  private answered = false;
  private deadline: NodeJS.Timeout | undefined;

  constructor(
    private readonly stream: ServerHttp2Stream,
    private readonly headers: IncomingHttpHeaders,
    private readonly api: ServerApi,
    private readonly opts: DirectInferOptions,
  ) {
    this.reader = new MessageReader(opts.maxReceiveBytes);
    // Errors on the stream always come with a 'close' (handled there); this only keeps them from being uncaught.
    stream.on('error', ignore);
    stream.once('close', () => this.onClose());
    const timeout = headers['grpc-timeout'];
    if (timeout !== undefined && !this.startDeadline(String(timeout))) return;
    stream.on('data', (chunk: Buffer) => this.onData(chunk));
    stream.once('end', () => this.onEnd());
  }

  private startDeadline(value: string): boolean {
    const m = TIMEOUT.exec(value);
    if (!m) {
      this.answer(INTERNAL, `Invalid grpc-timeout value "${value}"`);
      return false;
    }
    this.deadline = setTimeout(() => {
      this.answer(DEADLINE_EXCEEDED, 'Deadline exceeded');
      this.signal.abort();
    }, (Number(m[1]) * TIMEOUT_UNIT_MS[m[2]!]!) | 0);
    return true;
  }

  private onClose(): void {
    if (this.deadline) clearTimeout(this.deadline);
    if (this.answered) return;
    this.answered = true;
    this.signal.abort(); // the client went away before the answer
  }

  private onData(chunk: Buffer): void {
    if (this.answered) return;
    const problem = this.reader.write(chunk);
    if (problem) this.answer(problem.code, problem.details);
  }

  private onEnd(): void {
    if (this.answered) return;
    const received = this.reader.message();
    if (!received) return this.answer(UNIMPLEMENTED, `Received no request message for server streaming method ${MODEL_INFER_PATH}`);
    let msg: Msg;
    try {
      msg = this.opts.decode(received.subarray(5));
    } catch {
      return this.answer(INTERNAL, 'Error deserializing request');
    }
    const tp = this.headers.traceparent;
    modelInferCall(this.api, msg, this.reader.pooled, Array.isArray(tp) ? tp[0] : tp, this.signal, (err, res) => this.onResult(err, res));
  }

  /** Serialize now: the request's tensors (and the pooled buffer) are given back right after this returns. */
  private onResult(err: unknown, res: Msg | undefined): void {
    if (!res) {
      const f = grpcFailure(err);
      return this.answer(f.code, f.details);
    }
    let body: Buffer;
    try {
      body = this.opts.encode(res);
    } catch (e) {
      log.error('ModelInfer: serializing the response failed', e);
      return this.answer(INTERNAL, 'Error serializing response');
    }
    if (this.opts.maxSendBytes !== -1 && body.length > this.opts.maxSendBytes) {
      return this.answer(RESOURCE_EXHAUSTED, `Sent message larger than max (${body.length + 5} vs. ${this.opts.maxSendBytes})`);
    }
    this.answer(OK, 'OK', body);
  }

  /** The one exit: `message` (serialized, unprefixed) then OK trailers, or a trailers-only answer carrying `code` (grpc-js's shapes). */
  private answer(code: number, details: string, message?: Buffer): void {
    if (this.answered) return;
    this.answered = true;
    if (this.deadline) clearTimeout(this.deadline);
    const stream = this.stream;
    if (stream.destroyed || stream.closed) return;
    if (message === undefined) {
      stream.respond({ ...TRAILERS_ONLY_HEADERS, 'grpc-status': code, 'grpc-message': encodeURI(details) }, { endStream: true });
      stream.resume(); // drop any body still arriving
      return;
    }
    stream.respond(RESPONSE_HEADERS, { waitForTrailers: true });
    stream.once('wantTrailers', () => stream.sendTrailers(OK_TRAILERS));
    // The 5-byte prefix and the message go out as one write (corked), without copying the message behind the prefix.
    const prefix = Buffer.allocUnsafe(5);
    prefix[0] = 0;
    prefix.writeUInt32BE(message.length, 1);
    stream.cork();
    stream.write(prefix);
    stream.end(message);
  }
}

const ignore = () => undefined;
const OK_TRAILERS = { 'grpc-status': OK, 'grpc-message': 'OK' } as const;

/**
 * Assembles the one length-prefixed message of a unary call from DATA
 * chunks. A message that arrives in one chunk is used in place (no copy);
 * otherwise it is copied into a buffer from the receive pool, which the call
 * gives back once answered (`pooled`). Only identity-encoded calls come
 * here, and like grpc-js it then reads a message flagged compressed as it is.
 */
export class MessageReader {
  private head = Buffer.alloc(5);
  private headAt = 0;
  private buf: Buffer | undefined;
  private at = 0;
  private whole: Buffer | undefined;
  /** The receive-pool buffer holding the message, when it was assembled. */
  pooled: Buffer | undefined;

  constructor(private readonly maxBytes: number) {}

  /** Take one chunk; a gRPC status for what is wrong with the stream, else undefined. */
  write(chunk: Buffer): { code: number; details: string } | undefined {
    let o = 0;
    if (this.whole || (this.buf && this.at === this.buf.length)) {
      return { code: UNIMPLEMENTED, details: `Received a second request message for server streaming method ${MODEL_INFER_PATH}` };
    }
    if (this.headAt < 5) {
      // The common case: the whole message in this chunk, used in place.
      if (this.headAt === 0 && chunk.length >= 5) {
        const size = chunk.readUInt32BE(1);
        const bad = this.check(size);
        if (bad) return bad;
        if (chunk.length === size + 5) {
          this.whole = chunk;
          this.headAt = 5;
          return undefined;
        }
      }
      const n = Math.min(5 - this.headAt, chunk.length);
      chunk.copy(this.head, this.headAt, 0, n);
      this.headAt += n;
      o = n;
      if (this.headAt < 5) return undefined;
      const size = this.head.readUInt32BE(1);
      const bad = this.check(size);
      if (bad) return bad;
      this.buf = take(size + 5);
      this.head.copy(this.buf, 0);
      this.at = 5;
      this.pooled = this.buf;
    }
    const buf = this.buf!;
    const n = Math.min(chunk.length - o, buf.length - this.at);
    chunk.copy(buf, this.at, o, o + n);
    this.at += n;
    if (o + n < chunk.length) {
      return { code: UNIMPLEMENTED, details: `Received a second request message for server streaming method ${MODEL_INFER_PATH}` };
    }
    return undefined;
  }

  /** The whole framed message (5-byte prefix included), or undefined when none (or only part of one) arrived. */
  message(): Buffer | undefined {
    if (this.whole) return this.whole;
    return this.buf && this.at === this.buf.length ? this.buf : undefined;
  }

  private check(size: number): { code: number; details: string } | undefined {
    if (this.maxBytes !== -1 && size > this.maxBytes) {
      return { code: RESOURCE_EXHAUSTED, details: `Received message larger than max (${size} vs ${this.maxBytes})` };
    }
    return undefined;
  }
}
