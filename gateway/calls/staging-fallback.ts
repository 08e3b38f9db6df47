// What a call does when its payload is above the staging threshold and the
// arena has no slice for it: go inline when the engine can take the payload
// in one message, or refuse with 503 SHM_EXHAUSTED when shared memory is full
// and the payload is over the engine's inline limit (a server fault, so a
// 5xx the client may retry, never the engine's 400 for a shrunk region).
// Counted in gateway_staging_fallback_inline_total{reason} and
// gateway_shm_exhausted_total{outcome}.
import { MAX_MESSAGE_BYTES } from '../../protocol/index.ts';
import { gatewayError } from '../core/errors.ts';
import type { GatewayMetrics } from '../core/metrics.ts';
import type { NoSliceReason, StagingArena } from '../staging/staging-arena.ts';

/** The default largest payload sent inline: the engine's gRPC message limit less 1 MiB for the message's other fields. */
export const DEFAULT_MAX_INLINE_BYTES = MAX_MESSAGE_BYTES - 1024 * 1024;

/** The decision alone: inline unless shared memory is exhausted and the payload is over the inline limit. */
export function noSliceOutcome(size: number, maxInlineBytes: number, reason: NoSliceReason): 'inline' | 'refuse' {
  return reason === 'shm_exhausted' && size > maxInlineBytes ? 'refuse' : 'inline';
}

/**
 * A call wanted `size` bytes of staging and got none: throw SHM_EXHAUSTED
 * when it cannot go inline, else (when `count`) record the inline fallback.
 */
export function onNoSlice(
  deps: { arena?: StagingArena; metrics?: GatewayMetrics; maxInlineBytes?: number },
  size: number,
  count: boolean,
): void {
  if (!deps.arena) return;
  const reason = deps.arena.whyNoSlice();
  const limit = deps.maxInlineBytes ?? DEFAULT_MAX_INLINE_BYTES;
  if (noSliceOutcome(size, limit, reason) === 'refuse') {
    deps.metrics?.shmExhausted.inc({ outcome: 'refused' });
    const err = gatewayError('SHM_EXHAUSTED', { size, limit });
    err.headers = { 'retry-after': '5' };
    throw err;
  }
  if (!count) return;
  if (reason === 'shm_exhausted') deps.metrics?.shmExhausted.inc({ outcome: 'inline' });
  deps.metrics?.stagingFallback.inc({ reason });
}
