// Slot bookkeeping of the sequence batcher: pinning, backlog, restart, END,
// idle release, with times passed in (no sleeping).
import { describe, expect, it } from 'vitest';
import { SequenceSlots } from '../../engine/scheduling/sequence-slots.ts';
import { sequenceKey } from '../../engine/config/sequence-config.ts';
import { StatusError } from '../../engine/api/status.ts';

const mk = (pinned = true, perInstance = [2, 1]) => new SequenceSlots<{ n: number }>(perInstance, pinned);
const admit = (t: SequenceSlots<{ n: number }>, id: number | string, start: boolean, end = false, now = 0n) =>
  t.admit(typeof id === 'number' ? BigInt(id) : id, sequenceKey(typeof id === 'number' ? BigInt(id) : id), start, end, now, 'm', () => ({
    n: 0,
  }));

describe('SequenceSlots', () => {
  it('pins each sequence to a slot of one instance and backlogs the rest (direct)', () => {
    const t = mk();
    const seqs = [1, 2, 3, 4].map((id) => admit(t, id, true).seq);
    // Lowest slot index first across instances (Triton's ready-slot queue): batches grow evenly.
    expect(seqs.map((s) => s.slot && [s.slot.instance, s.slot.index])).toEqual([[0, 0], [1, 0], [0, 1], undefined]);
    expect(t.inSlots(0).map((s) => s.id)).toEqual([1n, 3n]);
    expect(t.backlogCount).toBe(1);
    // The backlog sequence takes the slot the first one gives back.
    admit(t, 1, false, true);
    expect(t.release(seqs[0]!)?.id).toBe(4n);
    expect([seqs[3]!.slot?.instance, seqs[3]!.slot?.index]).toEqual([0, 0]);
  });

  it('does not pin in the oldest strategy', () => {
    const t = mk(false, [3]);
    expect(admit(t, 'a', true).seq.slot).toEqual({ instance: -1, index: 0 });
  });

  it("refuses a non-START request of an unknown sequence with Triton's message", () => {
    const t = mk();
    expect(() => admit(t, 9, false)).toThrow(StatusError);
    expect(() => admit(t, 9, false)).toThrow(
      "inference request for sequence 9 to model 'm' must specify the START flag on the first request of the sequence",
    );
  });

  it('a START on a live sequence continues it as a restart; END frees the ID at once', () => {
    const t = mk();
    const a = admit(t, 5, true);
    const b = admit(t, 5, true);
    expect([b.restarted, b.seq]).toEqual([true, a.seq]);
    admit(t, 5, false, true);
    expect(a.seq.ended).toBe(true);
    expect(t.liveCount).toBe(0);
    expect(() => admit(t, 5, false)).toThrow(/START flag/);
    // 5 and '5' are different sequences.
    expect(admit(t, '5', true).seq).not.toBe(a.seq);
  });

  it('finds idle sequences by time and says why a later request fails', () => {
    const t = mk();
    admit(t, 1, true, false, 100n);
    const two = admit(t, 2, true, false, 100n).seq;
    admit(t, 2, false, false, 900n);
    expect(t.nextIdleAt(1000n)).toBe(1100n);
    const idle = t.idle(1100n, 1000n, () => true);
    expect(idle.map((s) => s.id)).toEqual([1n]);
    t.releaseIdle(idle[0]!, 1100n);
    expect(() => admit(t, 1, false)).toThrow(/released after max_sequence_idle_microseconds/);
    expect(t.idle(1100n, 1000n, () => false)).toEqual([]);
    expect(two.slot).toBeDefined();
  });
});
