// One ModelInfer on a local-channel connection (local-connection.ts): its
// deadline, its cancellation, and its answer, given once, serialized with
// the gRPC service's own serializer and checked against gRPC's send limit.
//
// Ownership: owned by its connection's map of open calls. Event loop only.
import type { ServerApi } from '../../api/server-api.ts';
import { RequestCancel } from '../../api/cancel-signal.ts';
import { log } from '../../../common/logger.ts';
import { grpcFailure, modelInferCall } from '../grpc/model-infer-call.ts';
import { GrpcStatus, GrpcText } from '../../../protocol/grpc-status.ts';
import type { ModelInferRequest, ModelInferResponse } from '../../../protocol/kserve-messages.ts';

/** What a call needs of its connection. */
export interface CallOwner {
  readonly opts: {
    maxSendBytes: number;
    decode: (b: Buffer) => ModelInferRequest;
    encode: (m: ModelInferResponse<Uint8Array>) => Buffer;
  };
  reply(id: number, code: number, details: string, body?: Buffer): void;
}

/** One ModelInfer on a connection: deadline, cancellation, the answer once. */
export class LocalCall {
  private readonly signal = new RequestCancel();
  private deadline: NodeJS.Timeout | undefined;
  private done = false;

  constructor(
    private readonly conn: CallOwner,
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
