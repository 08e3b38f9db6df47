// The protocol in one place, read by both sides: the .proto files of this
// folder loaded with protobufjs (field names as written, snake_case; int64 as
// JS numbers), and grpc-js service definitions whose (de)serializers use
// protobufjs directly so `bytes` fields decode as views of the received buffer.
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import protobuf from 'protobufjs';
import type { ServiceDefinition, MethodDefinition } from '@grpc/grpc-js';
import { exactInt64Parameters } from './exact-int64.ts';

// int64/uint64 as plain numbers (exact up to 2^53) instead of Long objects.
(protobuf.util as { Long?: unknown }).Long = undefined;
protobuf.configure();

export const PROTO_DIR = path.dirname(fileURLToPath(import.meta.url));

let root: protobuf.Root | undefined;

/** The loaded protocol (grpc_service.proto, model_config.proto, health.proto). */
export function protocolRoot(): protobuf.Root {
  if (root) return root;
  const r = new protobuf.Root();
  r.resolvePath = (_origin, target) => path.join(PROTO_DIR, path.basename(target));
  r.loadSync(['grpc_service.proto', 'health.proto'], { keepCase: true });
  r.resolveAll();
  // Correlation IDs are uint64: InferParameter keeps int64/uint64 past 2^53 exact (bigint).
  exactInt64Parameters(r.lookupType('inference.InferParameter'));
  root = r;
  return r;
}

/** Look up a message type, e.g. 'inference.ModelConfig'. */
export function messageType(name: string): protobuf.Type {
  return protocolRoot().lookupType(name);
}

/** Conversion options used whenever a message becomes a plain object. */
export const TO_OBJECT: protobuf.IConversionOptions = {
  enums: String,
  longs: Number,
  bytes: Buffer as unknown as typeof String,
  defaults: false,
  arrays: true,
  objects: true,
  oneofs: false,
};

// Messages on the hot path carry no enums: encode them as they are, skipping
// fromObject's copy. Everything else goes through fromObject (enum names).
const DIRECT = new Set(['inference.ModelInferRequest', 'inference.ModelInferResponse', 'inference.ModelStreamInferResponse']);

function serializer(t: protobuf.Type): (v: object) => Buffer {
  const direct = DIRECT.has(t.fullName.replace(/^\./, ''));
  return (v) => {
    const w = t.encode(direct ? (v as protobuf.Message) : t.fromObject(v as Record<string, unknown>)).finish();
    return Buffer.from(w.buffer, w.byteOffset, w.byteLength);
  };
}

function deserializer(t: protobuf.Type): (b: Buffer) => object {
  return (b) => t.decode(b);
}

function serviceDefinition(serviceName: string): ServiceDefinition {
  const svc = protocolRoot().lookupService(serviceName);
  const def: Record<string, MethodDefinition<object, object>> = {};
  for (const m of svc.methodsArray) {
    m.resolve();
    const reqT = m.resolvedRequestType!;
    const resT = m.resolvedResponseType!;
    def[m.name] = {
      path: `/${serviceName}/${m.name}`,
      requestStream: !!m.requestStream,
      responseStream: !!m.responseStream,
      requestSerialize: serializer(reqT),
      requestDeserialize: deserializer(reqT),
      responseSerialize: serializer(resT),
      responseDeserialize: deserializer(resT),
      originalName: m.name,
    };
  }
  return def as ServiceDefinition;
}

let inferenceSvc: ServiceDefinition | undefined;
let healthSvc: ServiceDefinition | undefined;

/** inference.GRPCInferenceService, for grpc-js servers and clients. */
export function inferenceService(): ServiceDefinition {
  return (inferenceSvc ??= serviceDefinition('inference.GRPCInferenceService'));
}

/** grpc.health.v1.Health. */
export function healthService(): ServiceDefinition {
  return (healthSvc ??= serviceDefinition('grpc.health.v1.Health'));
}

/** Channel/server options raising grpc-js's 4 MB message limits (Triton accepts up to 2 GB). */
export const MAX_MESSAGE_BYTES = 2 ** 31 - 1;
export const GRPC_OPTIONS = {
  'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
  'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
};
