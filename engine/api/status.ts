// The engine's closed set of error codes (Triton's TRITONSERVER_Error_Code),
// mapped once to HTTP and once to gRPC. Every engine error is a StatusError.
import { GrpcStatus } from '../../protocol/grpc-status.ts';
import { IllegalTransition } from '../../common/lifecycle.ts';

export type StatusCode =
  | 'INTERNAL'
  | 'NOT_FOUND'
  | 'INVALID_ARG'
  | 'UNAVAILABLE'
  | 'UNSUPPORTED'
  | 'ALREADY_EXISTS'
  | 'CANCELLED'
  | 'UNKNOWN';

const STATUS_CODES: ReadonlySet<string> = new Set<StatusCode>([
  'INTERNAL',
  'NOT_FOUND',
  'INVALID_ARG',
  'UNAVAILABLE',
  'UNSUPPORTED',
  'ALREADY_EXISTS',
  'CANCELLED',
  'UNKNOWN',
]);

/** A code a model (JS or Python) reported, when it is one of ours. */
export const isStatusCode = (s: unknown): s is StatusCode => typeof s === 'string' && STATUS_CODES.has(s);

/**
 * Longest error text sent to a client. grpc-js puts `details` in an HTTP/2
 * trailer; one over the peer's header-list limit (~64 KB) never arrived and
 * wedged every later call on that connection, so texts are capped here, once.
 */
export const MAX_ERROR_MESSAGE_CHARS = 4096;

/** `message` cut to MAX_ERROR_MESSAGE_CHARS, saying how much was cut. */
export function capMessage(message: string): string {
  if (message.length <= MAX_ERROR_MESSAGE_CHARS) return message;
  const cut = message.length - MAX_ERROR_MESSAGE_CHARS;
  return `${message.slice(0, MAX_ERROR_MESSAGE_CHARS)}...(${cut} more characters)`;
}

/** An error carrying one of the engine's status codes; its message is safe to send to clients. */
export class StatusError extends Error {
  constructor(
    readonly code: StatusCode,
    message: string,
    /** Detail for the log only (errno, stack of a cause); never sent to clients. */
    readonly detail?: unknown,
  ) {
    super(capMessage(message));
    this.name = 'StatusError';
  }
}

export const internal = (m: string, d?: unknown) => new StatusError('INTERNAL', m, d);
export const notFound = (m: string) => new StatusError('NOT_FOUND', m);
export const invalidArg = (m: string) => new StatusError('INVALID_ARG', m);
export const unavailable = (m: string) => new StatusError('UNAVAILABLE', m);
export const unsupported = (m: string) => new StatusError('UNSUPPORTED', m);
export const alreadyExists = (m: string) => new StatusError('ALREADY_EXISTS', m);
export const cancelled = (m: string) => new StatusError('CANCELLED', m);

/** Turn anything thrown into a StatusError; unknown errors become INTERNAL with a generic message. */
export function toStatusError(err: unknown): StatusError {
  if (err instanceof StatusError) return err;
  if (err instanceof IllegalTransition) return new StatusError('INTERNAL', err.message, err);
  return new StatusError('INTERNAL', 'internal error', err);
}

/**
 * An explicit load's failure as Triton words it: `failed to load '<model>'`
 * first (clients and tools match on it), then our own reason.
 */
export function failedLoad(model: string, err: unknown): StatusError {
  const se = toStatusError(err);
  const prefix = `failed to load '${model}'`;
  if (se.message.startsWith(prefix)) return se;
  const reason = se.message === 'internal error' && err instanceof Error && !(err instanceof StatusError) ? err.message : se.message;
  return new StatusError(se.code, `${prefix}: ${reason}`, se.detail ?? err);
}

/**
 * Triton's HTTP mapping (server src/http_server.cc, HttpCodeFromError):
 * INTERNAL 500, NOT_FOUND 404, UNAVAILABLE 503, UNSUPPORTED 501, and every
 * other code (UNKNOWN, INVALID_ARG, ALREADY_EXISTS, CANCELLED) 400.
 */
export function httpStatusOf(code: StatusCode): number {
  switch (code) {
    case 'INTERNAL':
      return 500;
    case 'NOT_FOUND':
      return 404;
    case 'UNAVAILABLE':
      return 503;
    case 'UNSUPPORTED':
      return 501;
    default:
      return 400;
  }
}

/** Triton's gRPC mapping (server src/grpc/grpc_utils.cc). */
export function grpcStatusOf(code: StatusCode): GrpcStatus {
  switch (code) {
    case 'INVALID_ARG':
      return GrpcStatus.INVALID_ARGUMENT;
    case 'NOT_FOUND':
      return GrpcStatus.NOT_FOUND;
    case 'UNAVAILABLE':
      return GrpcStatus.UNAVAILABLE;
    case 'UNSUPPORTED':
      return GrpcStatus.UNIMPLEMENTED;
    case 'ALREADY_EXISTS':
      return GrpcStatus.ALREADY_EXISTS;
    case 'CANCELLED':
      return GrpcStatus.CANCELLED;
    case 'INTERNAL':
      return GrpcStatus.INTERNAL;
    default:
      return GrpcStatus.UNKNOWN;
  }
}
