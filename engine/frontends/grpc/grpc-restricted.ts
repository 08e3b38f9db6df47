// Triton's --grpc-restricted-protocol on the gRPC frontend: every RPC of
// GRPCInferenceService and the health Check behind its group's metadata
// check (../restricted-api.ts decides). A call without the group's
// `triton-grpc-protocol-<key>` ends UNAVAILABLE before its handler runs, a
// stream before it reads a request, as Triton's grpc_server.cc does.
import * as grpc from '@grpc/grpc-js';
import { failedRestriction, grpcRestrictedText, GRPC_RPC_GROUPS, type RestrictedFeatures } from '../restricted-api.ts';

/** Messages pass through unread: the check is on metadata only. */
type Msg = unknown;

/** A call's metadata value by (lowercase) name, for the restriction check. */
const metadataReader = (md: grpc.Metadata) => (name: string) => {
  const v = md.get(name)[0];
  return v === undefined ? undefined : String(v);
};

/** `impl` with each handler behind its group's check; unchanged when nothing is restricted. */
export function restricted(
  impl: grpc.UntypedServiceImplementation,
  features: RestrictedFeatures | undefined,
): grpc.UntypedServiceImplementation {
  if (!features?.size) return impl;
  const out: grpc.UntypedServiceImplementation = {};
  for (const [name, h] of Object.entries(impl)) {
    const failed = (call: { metadata: grpc.Metadata }) => failedRestriction(features, GRPC_RPC_GROUPS[name], metadataReader(call.metadata));
    out[name] =
      name === 'ModelStreamInfer'
        ? (call: grpc.ServerDuplexStream<Msg, Msg>) => {
            const r = failed(call);
            if (r) call.emit('error', { code: grpc.status.UNAVAILABLE, details: grpcRestrictedText(r) });
            else (h as grpc.handleBidiStreamingCall<Msg, Msg>)(call);
          }
        : (call: grpc.ServerUnaryCall<Msg, Msg>, cb: grpc.sendUnaryData<Msg>) => {
            const r = failed(call);
            if (r) cb({ code: grpc.status.UNAVAILABLE, details: grpcRestrictedText(r) } as grpc.ServiceError, null);
            else (h as grpc.handleUnaryCall<Msg, Msg>)(call, cb);
          };
  }
  return out;
}
