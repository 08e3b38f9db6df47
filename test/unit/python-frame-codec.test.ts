import { describe, expect, it } from 'vitest';
import { FrameDecoder, MAX_FRAME_BYTES, encodeFrame } from '../../engine/backends/python/frame-codec.ts';

describe('python stub frame codec', () => {
  it('round-trips frames split at every byte boundary and glued together', () => {
    const msgs = [{ t: 'exec', seq: 1, requests: [{ id: 'ä', inputs: [] }] }, { t: 'fini' }, { t: 'x', big: 'y'.repeat(70_000) }];
    const wire = Buffer.concat(msgs.map(encodeFrame));
    for (const step of [1, 3, 7, 4096, wire.length]) {
      const d = new FrameDecoder();
      const got: unknown[] = [];
      for (let i = 0; i < wire.length; i += step) got.push(...d.push(wire.subarray(i, i + step)));
      expect(got).toEqual(msgs);
    }
  });

  it('length is 4-byte little-endian then UTF-8 JSON', () => {
    const f = encodeFrame({ a: 1 });
    expect(f.readUInt32LE(0)).toBe(7);
    expect(f.toString('utf8', 4)).toBe('{"a":1}');
  });

  it('rejects a length over the limit instead of buffering it', () => {
    const head = Buffer.alloc(4);
    head.writeUInt32LE(MAX_FRAME_BYTES + 1);
    expect(() => new FrameDecoder().push(head)).toThrow(/exceeds/);
  });
});
