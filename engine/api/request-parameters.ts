// Parsing of the request/tensor parameters both frontends share: Triton's
// shared-memory parameters and the scheduling parameters (priority, timeout).
import { invalidArg } from './status.ts';
import type { ParamValue, ShmRef } from './infer-request.ts';

// A string counts only when it is all digits: Number('') and Number(' ') are 0.
const num = (v: ParamValue | undefined): number | undefined =>
  v === undefined
    ? undefined
    : typeof v === 'bigint'
      ? Number(v)
      : typeof v === 'number'
        ? v
        : typeof v === 'string' && /^\d+$/.test(v)
          ? Number(v)
          : NaN;

/**
 * The shared_memory_region / _offset / _byte_size parameters of one tensor,
 * with Triton's checks; undefined when the tensor does not use shm.
 */
export function parseShmParams(
  params: Record<string, ParamValue> | undefined,
  tensor: string,
  kind: 'input' | 'output',
): ShmRef | undefined {
  if (!params) return undefined;
  const region = params.shared_memory_region;
  const offset = num(params.shared_memory_offset);
  const size = num(params.shared_memory_byte_size);
  if (region === undefined) {
    if (offset !== undefined || size !== undefined) {
      throw invalidArg(
        `'shared_memory_offset' and 'shared_memory_byte_size' can only be given with 'shared_memory_region' for ${kind} '${tensor}'`,
      );
    }
    return undefined;
  }
  if (typeof region !== 'string' || region === '') {
    throw invalidArg(`'shared_memory_region' must be a non-empty string for ${kind} '${tensor}'`);
  }
  if (size === undefined) {
    throw invalidArg(`'shared_memory_byte_size' must be given with 'shared_memory_region' for ${kind} '${tensor}'`);
  }
  const exactOffset = uint64Of(params.shared_memory_offset ?? 0);
  const exactSize = uint64Of(params.shared_memory_byte_size);
  if (exactOffset === undefined || exactSize === undefined) {
    throw invalidArg(`shared memory offset and byte size must be non-negative integers for ${kind} '${tensor}'`);
  }
  // Past 2^53 a number is no longer exact: keep both as sent for the region's checks (which refuse them).
  if (!Number.isSafeInteger(size) || (offset !== undefined && !Number.isSafeInteger(offset))) {
    return { region, offset: Number(exactOffset), byteSize: Number(exactSize), wide: { offset: exactOffset, byteSize: exactSize } };
  }
  return { region, offset: offset ?? 0, byteSize: size };
}

/** An unsigned 64-bit integer parameter exactly, or undefined when it is not one. */
function uint64Of(v: ParamValue | undefined): bigint | undefined {
  if (typeof v === 'bigint') return v >= 0n && v < UINT64_END ? v : undefined;
  if (typeof v === 'number') return Number.isInteger(v) && v >= 0 && v < 2 ** 64 ? BigInt(v) : undefined;
  if (typeof v === 'string' && /^\d+$/.test(v)) return uint64Of(BigInt(v));
  return undefined;
}

/** Triton's correlation ID as the sequence batcher keys it: a uint64 (exact, as a bigint) or a string. */
export type CorrelationId = bigint | string;

/** 2^64: the first value past uint64 (Triton's correlation IDs are uint64). */
const UINT64_END = 2n ** 64n;

/**
 * Triton's correlation ID: an unsigned 64-bit integer or a string. Numbers
 * at or past 2^64, negative or fractional ones, and other types are refused
 * here, for every model (a JSON 18446744073709551616 used to be taken).
 */
export function checkSequenceId(v: ParamValue | undefined): void {
  if (v === undefined || typeof v === 'string') return;
  const n = typeof v === 'bigint' ? v : typeof v === 'number' && Number.isInteger(v) ? BigInt(v) : undefined;
  if (n === undefined || n < 0n || n >= UINT64_END) {
    throw invalidArg(`request parameter 'sequence_id' must be an unsigned 64-bit integer (below 2^64) or a string, got ${String(v)}`);
  }
}

/** The request-level `priority` and `timeout` (µs) parameters; `sequence_id` checked (checkSequenceId). */
export function parseSchedulingParams(params: Record<string, ParamValue>): { priority?: number; timeoutUs?: number } {
  checkSequenceId(params.sequence_id);
  const priority = num(params.priority);
  const timeoutUs = num(params.timeout);
  if (priority !== undefined && (!Number.isInteger(priority) || priority < 0)) {
    throw invalidArg(`request parameter 'priority' must be a non-negative integer`);
  }
  if (timeoutUs !== undefined && (!Number.isInteger(timeoutUs) || timeoutUs < 0)) {
    throw invalidArg(`request parameter 'timeout' must be a non-negative integer (microseconds)`);
  }
  return { priority, timeoutUs };
}

/** The one `triton_` request parameter Triton's gRPC server takes (TRITON_RESERVED_REQUEST_PARAMS). */
export const TRITON_RESERVED_REQUEST_PARAMS: readonly string[] = ['triton_enable_empty_final_response'];

/**
 * Triton's refusal of request parameters named `triton_...`, word for word:
 * over HTTP none is allowed; over gRPC only TRITON_RESERVED_REQUEST_PARAMS.
 */
export function checkReservedParams(params: Record<string, ParamValue>, protocol: 'http' | 'grpc'): void {
  for (const k of Object.keys(params)) {
    if (!k.startsWith('triton_')) continue;
    if (protocol === 'http') {
      throw invalidArg(`parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified.`);
    }
    if (!TRITON_RESERVED_REQUEST_PARAMS.includes(k)) {
      throw invalidArg(
        `parameter keys starting with 'triton_' are reserved for Triton usage. Only the following keys starting with 'triton_' are allowed: ${TRITON_RESERVED_REQUEST_PARAMS.join(' ')}`,
      );
    }
  }
}
