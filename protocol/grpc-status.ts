// gRPC status codes and the status texts grpc-js (1.14) sends, declared once
// for the two paths that speak gRPC on node:http2 beside grpc-js (the
// engine's direct ModelInfer, the client's direct unary call) and for the
// engine's one mapping of its codes. The numbers are gRPC's own (the same as
// grpc-js's `status` enum); the texts are grpc-js's, word for word, so a
// client cannot tell which path answered.

/** gRPC status codes (grpc/doc/statuscodes.md), as numbers. */
export const GrpcStatus = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;
export type GrpcStatusName = keyof typeof GrpcStatus;
export type GrpcStatus = (typeof GrpcStatus)[GrpcStatusName];

const NAMES = Object.keys(GrpcStatus) as GrpcStatusName[];

/** The code's name ('NOT_FOUND'), or the number itself when it is not a gRPC code. */
export function grpcStatusName(code: number): string {
  return NAMES[code] ?? String(code);
}

/** A gRPC outcome: status code and details text. */
export interface GrpcOutcome {
  code: number;
  details: string;
}

/** grpc-js's texts. */
export const GrpcText = {
  OK: 'OK',
  DEADLINE_EXCEEDED: 'Deadline exceeded',
  CANCELLED_ON_CLIENT: 'Cancelled on client',
  CHANNEL_SHUT_DOWN: 'Channel has been shut down',
  NO_CONNECTION: 'No connection established',
  DESERIALIZE_REQUEST: 'Error deserializing request',
  SERIALIZE_RESPONSE: 'Error serializing response',
  receivedTooLarge: (size: number, max: number) => `Received message larger than max (${size} vs ${max})`,
  /** `framedSize` counts the 5-byte prefix, as grpc-js does. */
  sentTooLarge: (framedSize: number, max: number) => `Sent message larger than max (${framedSize} vs. ${max})`,
  invalidTimeout: (value: string) => `Invalid grpc-timeout value "${value}"`,
  noRequestMessage: (path: string) => `Received no request message for server streaming method ${path}`,
  secondRequestMessage: (path: string) => `Received a second request message for server streaming method ${path}`,
  httpStatus: (status: number | string) => `Received HTTP status code ${status}`,
} as const;

/** grpc-message is percent-encoded (gRPC over HTTP/2); a malformed one is shown as sent. */
export function decodeGrpcMessage(m: string): string {
  try {
    return decodeURI(m);
  } catch {
    return m;
  }
}

/** Percent-encode a details text for the grpc-message header, as grpc-js does. */
export const encodeGrpcMessage = (details: string): string => encodeURI(details);
