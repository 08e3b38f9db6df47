// One connection of the local channel (docs/engine/local-channel.md), the
// engine's side of it: the bytes (handshake, frames, flow control) are
// net/local/local-server-connection.ts's; here each REQUEST is run through
// the gRPC frontend's own ModelInfer call (local-call.ts, on
// grpc/model-infer-call.ts) with the same protobuf codec, deadline,
// restriction check and failure mapping, so a call answers here what it
// would over gRPC.
//
// Ownership: owns its byte-level connection; event loop only.
import type { Socket } from 'node:net';
import type { ServerApi } from '../../api/server-api.ts';
import { LocalCall } from './local-call.ts';
import { failedRestriction, grpcRestrictedText, type RestrictedFeatures } from '../restricted-api.ts';
import {
  LocalServerConnection,
  type LocalCallSink,
  type LocalServerConnectionOptions,
} from '../../../net/local/local-server-connection.ts';
import { GrpcStatus } from '../../../protocol/grpc-status.ts';
import type { ModelInferRequest, ModelInferResponse } from '../../../protocol/kserve-messages.ts';

export interface LocalConnectionOptions extends LocalServerConnectionOptions {
  restricted?: RestrictedFeatures;
  /** grpc.max_send_message_length (-1: no limit). */
  maxSendBytes: number;
  decode: (b: Buffer) => ModelInferRequest;
  encode: (m: ModelInferResponse<Uint8Array>) => Buffer;
}

export class LocalConnection implements LocalCallSink {
  private readonly conn: LocalServerConnection;
  /** The restriction an inference call on this connection fails (from HELLO's metadata), if any. */
  private denied: string | undefined;

  constructor(
    socket: Socket,
    private readonly api: ServerApi,
    readonly opts: LocalConnectionOptions,
    onGone: (c: LocalConnection) => void,
  ) {
    this.conn = new LocalServerConnection(socket, opts, this, () => onGone(this));
  }

  /** Close now (server stopping): open calls are cancelled. */
  close(): void {
    this.conn.close();
  }

  /** Answer call `id` (LocalCall's owner). */
  reply(id: number, code: number, details: string, body?: Buffer): void {
    this.conn.reply(id, code, details, body);
  }

  greeted(metadata: Record<string, string>): void {
    const r = failedRestriction(this.opts.restricted, 'inference', (name) => metadata[name]);
    this.denied = r ? grpcRestrictedText(r) : undefined;
  }

  request(id: number, message: Buffer, traceparent: string | undefined, timeoutMs: number): { cancel(): void } {
    const call = new LocalCall(this, id);
    // As grpc-js with the inference group restricted: the call ends UNAVAILABLE before its message is read.
    if (this.denied) this.reply(id, GrpcStatus.UNAVAILABLE, this.denied);
    else call.start(this.api, message, traceparent, timeoutMs);
    return call;
  }
}
