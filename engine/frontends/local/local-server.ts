// The local channel's listener (docs/engine/local-channel.md): a Unix
// socket, mode 0600, on which a colocated gateway sends unary ModelInfer
// without HTTP/2. Started by `--local-socket=PATH` (off by default: Triton
// has no such port). A stale socket file at PATH (a crashed engine's) is
// removed at start; the file is removed at stop.
//
// Ownership: owns the net.Server, the socket file and every connection.
import fs from 'node:fs';
import net from 'node:net';
import type { ServerApi } from '../../api/server-api.ts';
import type { RestrictedFeatures } from '../restricted-api.ts';
import { LocalConnection } from './local-connection.ts';
import { LOCAL_MAX_CALLS_IN_FLIGHT, LOCAL_MAX_UNSENT_BYTES } from '../../../net/local/local-server-connection.ts';
import { GRPC_OPTIONS, inferenceService } from '../../../protocol/index.ts';
import { REQUEST_FIELDS_BYTES } from '../../../net/local/local-channel.ts';
import { removeStaleSocket } from '../../../net/unix-socket.ts';
import type { ModelInferRequest, ModelInferResponse } from '../../../protocol/kserve-messages.ts';

export interface LocalServerOptions {
  path: string;
  /** --grpc-restricted-protocol: the channel enforces the inference group's key as gRPC does. */
  restricted?: RestrictedFeatures;
  /** Flow control per connection (docs/engine/local-channel.md#flow-control); the defaults when absent. */
  maxUnsentBytes?: number;
  maxCallsInFlight?: number;
}

/** Room for a REQUEST's fixed fields and traceparent beside the largest message gRPC accepts. */
const REQUEST_SLACK = REQUEST_FIELDS_BYTES + 0xffff;

export async function startLocalServer(api: ServerApi, opts: LocalServerOptions): Promise<{ path: string; close(): Promise<void> }> {
  const infer = inferenceService().ModelInfer!;
  const maxReceive = GRPC_OPTIONS['grpc.max_receive_message_length'];
  const connOpts = {
    restricted: opts.restricted,
    maxRequestBytes: maxReceive === -1 ? 0xffffffff : Math.min(maxReceive + REQUEST_SLACK, 0xffffffff),
    maxSendBytes: GRPC_OPTIONS['grpc.max_send_message_length'],
    maxUnsentBytes: opts.maxUnsentBytes ?? LOCAL_MAX_UNSENT_BYTES,
    maxCallsInFlight: opts.maxCallsInFlight ?? LOCAL_MAX_CALLS_IN_FLIGHT,
    decode: infer.requestDeserialize as (b: Buffer) => ModelInferRequest,
    encode: infer.responseSerialize as (m: ModelInferResponse<Uint8Array>) => Buffer,
  };
  const conns = new Set<LocalConnection>();
  const server = net.createServer((socket) => {
    conns.add(new LocalConnection(socket, api, connOpts, (c) => conns.delete(c)));
  });
  removeStaleLocalSocket(opts.path);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.path, () => {
      server.off('error', reject);
      resolve();
    });
  });
  // Only this user may connect (the restricted key is checked on top, when configured).
  fs.chmodSync(opts.path, 0o600);
  return {
    path: opts.path,
    close: () =>
      new Promise<void>((resolve) => {
        for (const c of [...conns]) c.close();
        server.close(() => resolve());
      }).finally(() => removeStaleLocalSocket(opts.path)),
  };
}

/** Unlink a stale socket file at `p`; a file there that is not a socket stops the start. */
export function removeStaleLocalSocket(p: string): void {
  if (removeStaleSocket(p) === 'not-a-socket') throw new Error(`--local-socket=${p}: a file that is not a socket is in the way`);
}
