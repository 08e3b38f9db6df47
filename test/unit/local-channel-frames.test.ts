// The local channel's frame reader and codec (net/local/local-channel.ts),
// fuzzed with fast-check: frames split anywhere are reassembled exactly;
// arbitrary bytes give the same frames and the same error however they are
// split, and never an exception; each decoder takes any payload.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeError,
  decodeHello,
  decodeRequest,
  decodeWelcome,
  encodeError,
  encodeFrame,
  encodeHello,
  encodeWelcome,
  FrameType,
  LocalFrameReader,
  LOCAL_VERSION,
  requestHead,
} from '../../net/local/local-channel.ts';

interface Got {
  type: number;
  id: number;
  payload: Buffer;
}

/** Feed `wire` in pieces cut at `cuts`; the frames read and the error, if any. */
function readAll(wire: Buffer, cuts: number[], max = 1 << 20): { frames: Got[]; error: string | undefined; pending: number } {
  const r = new LocalFrameReader(max);
  const frames: Got[] = [];
  let error: string | undefined;
  const at = [...new Set(cuts.map((c) => c % (wire.length + 1)))].sort((a, b) => a - b);
  let from = 0;
  for (const to of [...at, wire.length]) {
    if (to < from) continue;
    // Copies: a frame's payload may be a view of the chunk it came in.
    error ??= r.write(Buffer.from(wire.subarray(from, to)), (type, id, payload) =>
      frames.push({ type, id, payload: Buffer.from(payload) }),
    );
    from = to;
  }
  return { frames, error, pending: r.pending };
}

const frameArb = fc.record({
  type: fc.integer({ min: FrameType.HELLO, max: FrameType.CANCEL }),
  id: fc.integer({ min: 0, max: 0xffffffff }),
  payload: fc.uint8Array({ maxLength: 300 }),
});

describe('local channel frame reader', () => {
  it('reassembles any frames split at any points, exactly', () => {
    fc.assert(
      fc.property(fc.array(frameArb, { maxLength: 12 }), fc.array(fc.nat(), { maxLength: 20 }), (frames, cuts) => {
        const wire = Buffer.concat(frames.map((f) => encodeFrame(f.type as FrameType, f.id, f.payload)));
        const got = readAll(wire, cuts);
        expect(got.error).toBeUndefined();
        expect(got.pending).toBe(0);
        expect(got.frames).toEqual(frames.map((f) => ({ type: f.type, id: f.id, payload: Buffer.from(f.payload) })));
      }),
      { numRuns: 500 },
    );
  });

  it('reads arbitrary bytes the same however they are split, never throwing', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 400 }), fc.array(fc.nat(), { maxLength: 30 }), (bytes, cuts) => {
        const wire = Buffer.from(bytes);
        const whole = readAll(wire, [], 256);
        const split = readAll(wire, cuts, 256);
        expect(split.frames).toEqual(whole.frames);
        expect(split.error).toEqual(whole.error);
        if (whole.error) expect(whole.error).toMatch(/unknown frame type 0x[0-9a-f]{2}|frame of \d+ bytes exceeds the limit of 256/);
      }),
      { numRuns: 1000 },
    );
  });

  it('delivers the frames before junk, then names what is wrong and takes nothing more', () => {
    const good = encodeFrame(FrameType.REQUEST, 7, Buffer.from('abc'));
    const junk = Buffer.from([0, 0, 0, 1, 0x7f, 0, 0, 0, 1, 9]);
    const got = readAll(Buffer.concat([good, junk, good]), [3, 14]);
    expect(got.frames).toEqual([{ type: FrameType.REQUEST, id: 7, payload: Buffer.from('abc') }]);
    expect(got.error).toBe('unknown frame type 0x7f');
  });

  it('refuses a length over the limit at once, without waiting for (or buffering) its bytes', () => {
    const head = Buffer.alloc(9);
    head.writeUInt32BE(0xfffffff0, 0);
    head[4] = FrameType.REQUEST;
    const r = new LocalFrameReader(1 << 20);
    expect(r.write(head.subarray(0, 5), () => undefined)).toBe('REQUEST frame of 4294967280 bytes exceeds the limit of 1048576');
    expect(r.pending).toBe(0);
  });

  it('holds a truncated frame without delivering it or failing', () => {
    const f = encodeFrame(FrameType.RESPONSE, 3, Buffer.alloc(100, 1));
    const got = readAll(f.subarray(0, 60), [5, 30]);
    expect(got).toEqual({ frames: [], error: undefined, pending: 60 });
  });
});

describe('local channel payloads', () => {
  it('HELLO round-trips its version and metadata (names lowercased)', () => {
    const f = encodeHello({ version: LOCAL_VERSION, metadata: { 'Triton-Grpc-Protocol-Admin-Key': 'sé cret', b: '' } });
    expect(decodeHello(f.subarray(9))).toEqual({ version: 1, metadata: { 'triton-grpc-protocol-admin-key': 'sé cret', b: '' } });
  });

  it('a REQUEST head carries the timeout and traceparent before the message', () => {
    const msg = Buffer.from('proto');
    const wire = Buffer.concat([requestHead(9, 1234.2, '00-abc-01', msg.length), msg]);
    const got = readAll(wire, []);
    expect(got.frames[0]!.id).toBe(9);
    expect(decodeRequest(got.frames[0]!.payload)).toEqual({ timeoutMs: 1235, traceparent: '00-abc-01', message: msg });
  });

  it('ERROR and WELCOME round-trip', () => {
    expect(decodeError(encodeError(4, 14, 'gone ☂').subarray(9))).toEqual({ code: 14, message: 'gone ☂' });
    expect(decodeWelcome(encodeWelcome(1, 5000).subarray(9))).toEqual({ version: 1, maxRequestBytes: 5000 });
  });

  it('every decoder takes any payload: a value or a text naming the fault, never a throw', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 80 }), (bytes) => {
        const p = Buffer.from(bytes);
        for (const d of [decodeHello, decodeRequest, decodeError, decodeWelcome]) {
          const v = d(p);
          if (typeof v === 'string') expect(v).toMatch(/HELLO|REQUEST|ERROR|WELCOME/);
        }
      }),
      { numRuns: 1000 },
    );
  });

  it('a HELLO with a wrong magic or a truncated pair is named as such', () => {
    expect(decodeHello(Buffer.from('GET / HTTP/1.1'))).toMatch(/magic TRLC/);
    const f = encodeHello({ version: 1, metadata: { k: 'value' } }).subarray(9);
    expect(decodeHello(f.subarray(0, f.length - 2))).toBe('HELLO truncated in metadata pair 0');
  });
});
