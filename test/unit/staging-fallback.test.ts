// The decision a call makes when it wanted a staging slice and got none
// (gateway/calls/staging-fallback.ts, issue 41).
import { describe, expect, it } from 'vitest';
import { DEFAULT_MAX_INLINE_BYTES, noSliceOutcome } from '../../gateway/calls/staging-fallback.ts';
import { MAX_MESSAGE_BYTES } from '../../protocol/index.ts';

describe('staging fallback', () => {
  it('goes inline under the inline limit, whatever the reason', () => {
    for (const reason of ['shm_exhausted', 'unavailable', 'no_room'] as const) expect(noSliceOutcome(1000, 1000, reason)).toBe('inline');
  });
  it('refuses over the inline limit only when shared memory is exhausted', () => {
    expect(noSliceOutcome(1001, 1000, 'shm_exhausted')).toBe('refuse');
    expect(noSliceOutcome(1001, 1000, 'no_room')).toBe('inline');
    expect(noSliceOutcome(1001, 1000, 'unavailable')).toBe('inline');
  });
  it('the default inline limit leaves room in a gRPC message for the other fields', () => {
    expect(DEFAULT_MAX_INLINE_BYTES).toBe(MAX_MESSAGE_BYTES - 1024 * 1024);
  });
});
