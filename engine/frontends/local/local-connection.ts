// One connection of the local channel (docs/engine/local-channel.md): the
// handshake, then unary ModelInfer calls, each run through the gRPC
// frontend's own ModelInfer call (grpc/model-infer-call.ts) with the same
// protobuf codec, deadline, restriction check and failure mapping, so a
// call answers here what it would over gRPC.
//
// A framing error (bad length, unknown type, a HELLO that is not one,
// garbage) is logged naming what was wrong, answered with a call-0 ERROR
// and ends this connection only; its open calls are cancelled as a closed
// gRPC stream's would be.
//
// Ownership: owns its socket, reader, writer and open calls. Event loop only.
import type { Socket } from 'node:net';
import type { ServerApi } from '../../api/server-api.ts';
import { RequestCancel } from '../../api/cancel-signal.ts';
import { log, tracer } from '../../../common/logger.ts';
import { grpcFailure, modelInferCall } from '../grpc/model-infer-call.ts';
import { failedRestriction, grpcRestrictedText, type RestrictedFeatures } from '../restricted-api.ts';
import {
  decodeHello, decodeRequest, encodeError, encodeWelcome, FRAME_HEADER_BYTES, FrameType, frameTypeName, LOCAL_VERSION,
  LocalFrameReader, writeHeader,
} from '../../../protocol/local-channel.ts';
import { LocalFrameWriter } from '../../../protocol/local-frame-writer.ts';
import { GrpcStatus, GrpcText } from '../../../protocol/grpc-status.ts';
import type { ModelInferRequest, ModelInferResponse } from '../../../protocol/kserve-messages.ts';

export interface LocalConnectionOptions {
  restricted?: RestrictedFeatures;
  /** Largest REQUEST payload (bytes); larger frames end the connection (the client sends those over gRPC). */
  maxRequestBytes: number;
  /** grpc.max_send_message_length (-1: no limit). */
  maxSendBytes: number;
  decode: (b: Buffer) => ModelInferRequest;
  encode: (m: ModelInferResponse<Uint8Array>) => Buffer;
}

const trace = tracer('local');

let served = 0;
/** ModelInfer calls answered over local channels in this process (tests prove the channel carried them). */
export const localCallsServed = (): number => served;

export class LocalConnection {
  private readonly reader: LocalFrameReader;
  private readonly writer: LocalFrameWriter;
  private readonly calls = new Map<number, LocalCall>();
  private greeted = false;
  /** The restriction an inference call on this connection fails (from HELLO's metadata), if any. */
  private denied: string | undefined;
  private closed = false;
  private readonly peer: string;

  constructor(
    private readonly socket: Socket,
    private readonly api: ServerApi,
    readonly opts: LocalConnectionOptions,
    private readonly onGone: (c: LocalConnection) => void,
  ) {
    this.peer = `local channel connection ${nextConn++}`;
    this.reader = new LocalFrameReader(opts.maxRequestBytes);
    this.writer = new LocalFrameWriter(socket);
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    // Errors always come with a 'close' (handled there); traced, not thrown.
    socket.on('error', (e: Error) => trace(`${this.peer}: ${e.message}`));
    socket.once('close', () => this.gone());
  }

  /** Close now (server stopping): open calls are cancelled. */
  close(): void {
    this.socket.destroy();
    this.gone();
  }

  /** Answer call `id` with a RESPONSE (`body`: the serialized ModelInferResponse) or an ERROR. */
  reply(id: number, code: number, details: string, body?: Buffer): void {
    if (!this.calls.delete(id) || this.closed) return;
    if (body === undefined) return this.writer.push(encodeError(id, code, details));
    served++;
    const head = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
    writeHeader(head, 0, FrameType.RESPONSE, id, body.length);
    this.writer.push(head);
    this.writer.push(body);
  }

  private onData(chunk: Buffer): void {
    const err = this.reader.write(chunk, (type, id, payload) => this.onFrame(type, id, payload));
    if (err) this.protocolError(err);
  }

  private onFrame(type: FrameType, id: number, payload: Buffer): void {
    if (!this.greeted) return type === FrameType.HELLO ? this.onHello(payload) : this.protocolError(`expected HELLO first, got ${frameTypeName(type)}`);
    switch (type) {
      case FrameType.REQUEST:
        return this.onRequest(id, payload);
      case FrameType.CANCEL: {
        const c = this.calls.get(id);
        this.calls.delete(id);
        c?.cancel();
        return;
      }
      default:
        return this.protocolError(`unexpected ${frameTypeName(type)} frame from a client`);
    }
  }

  private onHello(payload: Buffer): void {
    const h = decodeHello(payload);
    if (typeof h === 'string') return this.protocolError(h);
    if (h.version !== LOCAL_VERSION) {
      return this.refuse(GrpcStatus.UNIMPLEMENTED, `local channel protocol version ${h.version} is not supported (this engine speaks ${LOCAL_VERSION})`);
    }
    this.greeted = true;
    const r = failedRestriction(this.opts.restricted, 'inference', (name) => h.metadata[name]);
    this.denied = r ? grpcRestrictedText(r) : undefined;
    this.writer.push(encodeWelcome(LOCAL_VERSION, this.opts.maxRequestBytes));
  }

  private onRequest(id: number, payload: Buffer): void {
    if (id === 0 || this.calls.has(id)) return this.protocolError(`REQUEST with call id ${id}, ${id === 0 ? 'reserved for the connection' : 'already in flight'}`);
    const f = decodeRequest(payload);
    if (typeof f === 'string') return this.protocolError(f);
    const call = new LocalCall(this, id);
    this.calls.set(id, call);
    // As grpc-js with the inference group restricted: the call ends UNAVAILABLE before its message is read.
    if (this.denied) return this.reply(id, GrpcStatus.UNAVAILABLE, this.denied);
    call.start(this.api, f.message, f.traceparent, f.timeoutMs);
  }

  /** A HELLO this engine will not take: say why (call 0), then close. */
  private refuse(code: number, message: string): void {
    log.warn(`${this.peer}: ${message}`);
    this.endWith(code, message);
  }

  private protocolError(what: string): void {
    if (this.closed) return;
    log.warn(`${this.peer}: closing on a protocol error: ${what}`);
    this.endWith(GrpcStatus.INTERNAL, `local channel protocol error: ${what}`);
  }

  private endWith(code: number, message: string): void {
    this.reader.stop(message);
    this.writer.push(encodeError(0, code, message));
    this.writer.flush();
    this.socket.end();
    this.gone();
  }

  private gone(): void {
    if (this.closed) return;
    this.closed = true;
    this.writer.discard();
    this.reader.stop('connection closed');
    // As a gRPC stream closed before its answer: every open call's request is cancelled.
    for (const c of this.calls.values()) c.cancel();
    this.calls.clear();
    this.onGone(this);
  }
}

let nextConn = 1;

/** One ModelInfer on a connection: deadline, cancellation, the answer once. */
class LocalCall {
  private readonly signal = new RequestCancel();
  private deadline: NodeJS.Timeout | undefined;
  private done = false;

  constructor(
    private readonly conn: LocalConnection,
    private readonly id: number,
  ) {}

  start(api: ServerApi, message: Buffer, traceparent: string | undefined, timeoutMs: number): void {
    if (timeoutMs > 0) {
      this.deadline = setTimeout(() => {
        this.answer(GrpcStatus.DEADLINE_EXCEEDED, GrpcText.DEADLINE_EXCEEDED);
        this.signal.abort();
      }, timeoutMs);
    }
    let msg: ModelInferRequest;
    try {
      msg = this.conn.opts.decode(message);
    } catch {
      // the gRPC paths answer an undecodable message with this status and text
      return this.answer(GrpcStatus.INTERNAL, GrpcText.DESERIALIZE_REQUEST);
    }
    modelInferCall(api, msg, undefined, traceparent, this.signal, (err, res) => this.onResult(err, res));
  }

  /** The client gave up (CANCEL, or the connection closed): cancel the request; nothing is answered. */
  cancel(): void {
    if (this.done) return;
    this.done = true;
    if (this.deadline) clearTimeout(this.deadline);
    this.signal.abort();
  }

  /** Serialize now: the request's tensors are views of the received frame. */
  private onResult(err: unknown, res: ModelInferResponse<Uint8Array> | undefined): void {
    if (this.done) return;
    if (!res) {
      const f = grpcFailure(err);
      return this.answer(f.code, f.details);
    }
    let body: Buffer;
    try {
      body = this.conn.opts.encode(res);
    } catch (e) {
      log.error('ModelInfer: serializing the response failed', e);
      return this.answer(GrpcStatus.INTERNAL, GrpcText.SERIALIZE_RESPONSE);
    }
    const max = this.conn.opts.maxSendBytes;
    if (max !== -1 && body.length > max) return this.answer(GrpcStatus.RESOURCE_EXHAUSTED, GrpcText.sentTooLarge(body.length + 5, max));
    this.answer(GrpcStatus.OK, GrpcText.OK, body);
  }

  private answer(code: number, details: string, body?: Buffer): void {
    if (this.done) return;
    this.done = true;
    if (this.deadline) clearTimeout(this.deadline);
    this.conn.reply(this.id, code, details, body);
  }
}
