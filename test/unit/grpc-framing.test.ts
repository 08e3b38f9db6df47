// The wire pieces in protocol/ that the engine's direct ModelInfer, the
// client's direct unary call and the engine's grpc-js decoder share: the
// length-prefixed message reader and writer, the grpc-timeout codec, and the
// status names and texts (checked against grpc-js's own).
import { PassThrough } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import {
  endWithMessage,
  MessageReader,
  messagePrefix,
  READ_EXTRA,
  READ_OK,
  GROW_FROM,
  READ_TOO_LARGE,
  UnaryMessageReader,
} from '../../protocol/grpc-framing.ts';
import { GrpcStatus, grpcStatusName, GrpcText } from '../../protocol/grpc-status.ts';
import { formatGrpcTimeout, parseGrpcTimeout } from '../../protocol/grpc-timeout.ts';

const frame = (msg: Uint8Array, flag = 0): Buffer => {
  const out = Buffer.alloc(5 + msg.byteLength);
  out[0] = flag;
  out.writeUInt32BE(msg.byteLength, 1);
  out.set(msg, 5);
  return out;
};
const allocs: number[] = [];
const counting = (n: number) => {
  allocs.push(n);
  return Buffer.allocUnsafe(n);
};

/** Every message, any chunking. */
class AllMessages extends MessageReader {
  got: Buffer[] = [];
  protected onMessage(m: Buffer): boolean {
    this.got.push(Buffer.from(m));
    return true;
  }
}

describe('UnaryMessageReader', () => {
  it('enforces the receive limit, in one chunk or with the prefix split', () => {
    const f = frame(Buffer.alloc(100));
    const r = new UnaryMessageReader(99, counting);
    expect(r.write(f)).toBe(READ_TOO_LARGE);
    expect(r.oversize).toBe(100);
    expect(GrpcText.receivedTooLarge(r.oversize, 99)).toBe('Received message larger than max (100 vs 99)');
    const split = new UnaryMessageReader(99, counting);
    expect(split.write(f.subarray(0, 2))).toBe(READ_OK);
    expect(split.write(f.subarray(2))).toBe(READ_TOO_LARGE);
  });

  it('uses a one-chunk message in place and copies a split one once', () => {
    const f = frame(Buffer.from('abc'));
    const whole = new UnaryMessageReader(-1, counting);
    allocs.length = 0;
    expect(whole.write(f)).toBe(READ_OK);
    expect(whole.message).toBe(f);
    expect(whole.messageInPlace).toBe(true);
    expect(allocs).toEqual([]);
    const split = new UnaryMessageReader(-1, counting);
    split.write(f.subarray(0, 4));
    expect(split.message).toBeUndefined();
    expect(split.partial).toBe(true);
    split.write(f.subarray(4, 6));
    split.write(f.subarray(6));
    expect(split.message!.equals(f)).toBe(true);
    expect(split.messageInPlace).toBe(false);
    expect(allocs).toEqual([8]);
  });

  it('reports anything after the message: in the same chunk, or in a later one', () => {
    const f = frame(Buffer.from('abc'));
    expect(new UnaryMessageReader(-1, counting).write(Buffer.concat([f, f]))).toBe(READ_EXTRA);
    expect(new UnaryMessageReader(-1, counting).write(Buffer.concat([f, Buffer.from([0])]))).toBe(READ_EXTRA);
    const later = new UnaryMessageReader(-1, counting);
    later.write(f);
    expect(later.write(Buffer.from([0]))).toBe(READ_EXTRA);
  });

  it('an empty message and a compressed flag are read as they are', () => {
    const empty = new UnaryMessageReader(-1, counting);
    empty.write(frame(new Uint8Array(0)));
    expect([...empty.message!]).toEqual([0, 0, 0, 0, 0]);
    const flagged = new UnaryMessageReader(-1, counting);
    flagged.write(frame(Buffer.from('x'), 1));
    expect(flagged.message![0]).toBe(1);
  });
});

describe('MessageReader (many messages)', () => {
  it('assembles every message the same at any chunking', () => {
    const msgs = [Buffer.alloc(0), Buffer.from('hello'), Buffer.alloc(70_000, 7), Buffer.from('!')];
    const all = Buffer.concat(msgs.map((m) => frame(m)));
    for (const size of [1, 2, 5, 6, 4096, all.length]) {
      for (const inPlace of [false, true]) {
        const r = new AllMessages(-1, counting, inPlace);
        for (let o = 0; o < all.length; o += size) expect(r.write(all.subarray(o, o + size))).toBe(READ_OK);
        expect(
          r.got.map((g) => g.subarray(5).toString('hex')),
          `chunks of ${size}`,
        ).toEqual(msgs.map((m) => m.toString('hex')));
        expect(r.partial).toBe(false);
      }
    }
  });
});

describe('MessageReader: a large declared size is not reserved up front (issue 41)', () => {
  it('a message declared at 1 GiB holds a buffer of GROW_FROM after 10 bytes, not 1 GiB', () => {
    const prefix = Buffer.from([0, 0x40, 0, 0, 0]); // 1 GiB declared
    allocs.length = 0;
    const r = new UnaryMessageReader(-1, counting);
    expect(r.write(Buffer.concat([prefix, Buffer.alloc(10)]))).toBe(READ_OK);
    expect(r.partial).toBe(true);
    expect(allocs).toEqual([]); // the allocator (the receive pool) is asked only for the whole message's buffer
    const before = process.memoryUsage().arrayBuffers;
    const many = Array.from({ length: 8 }, () => new UnaryMessageReader(-1, Buffer.allocUnsafeSlow));
    for (const m of many) m.write(Buffer.concat([prefix, Buffer.alloc(10)]));
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(8 * 2 * GROW_FROM);
  });

  it('a large message assembled from chunks of any size is whole and exact, and its final buffer comes from the allocator', () => {
    const body = Buffer.alloc(3 * GROW_FROM + 12345);
    for (let i = 0; i < body.length; i++) body[i] = (i * 31) & 0xff;
    const f = frame(body);
    for (const step of [1000, 65536, GROW_FROM, GROW_FROM + 1, 2 * GROW_FROM + 7]) {
      allocs.length = 0;
      const r = new UnaryMessageReader(-1, counting);
      let res = READ_OK;
      for (let at = 0; at < f.length; at += step) res = r.write(f.subarray(at, at + step));
      expect(res).toBe(READ_OK);
      expect(r.message?.equals(f), `chunks of ${step}`).toBe(true);
      expect(allocs).toEqual([f.length]);
    }
  });
});

describe('endWithMessage', () => {
  it('sends prefix and message, ending the stream', async () => {
    const s = new PassThrough();
    const chunks: Buffer[] = [];
    s.on('data', (d: Buffer) => chunks.push(d));
    const ended = new Promise((r) => s.on('end', r));
    endWithMessage(s, messagePrefix(3), Buffer.from('abc'));
    await ended;
    expect(Buffer.concat(chunks).toString('hex')).toBe(frame(Buffer.from('abc')).toString('hex'));
  });
});

describe('grpc-timeout', () => {
  it('parses as grpc-js does, truncating to whole ms', () => {
    expect(parseGrpcTimeout('250m')).toBe(250);
    expect(parseGrpcTimeout('2S')).toBe(2000);
    expect(parseGrpcTimeout('1H')).toBe(3_600_000);
    expect(parseGrpcTimeout('1500u')).toBe(1);
    expect(parseGrpcTimeout('999999n')).toBe(0);
    expect(parseGrpcTimeout('5 S')).toBe(5000);
    expect(parseGrpcTimeout('soon')).toBeUndefined();
    expect(parseGrpcTimeout('')).toBeUndefined();
  });

  it('formats with at most 8 digits, at least 1 ms, and round-trips', () => {
    expect(formatGrpcTimeout(250)).toBe('250m');
    expect(formatGrpcTimeout(0)).toBe('1m');
    expect(formatGrpcTimeout(-5)).toBe('1m');
    expect(formatGrpcTimeout(123_456_789)).toBe('123457S');
    for (const ms of [1, 999, 99_999_999, 123_456_789, 20 * 86_400_000]) {
      const v = formatGrpcTimeout(ms);
      expect(v).toMatch(/^\d{1,8}[mSMH]$/);
      expect(parseGrpcTimeout(v)!).toBeGreaterThanOrEqual(ms);
    }
  });
});

describe('gRPC status', () => {
  it("has grpc-js's numbers and names", () => {
    for (const [name, code] of Object.entries(GrpcStatus)) {
      expect(grpc.status[name as keyof typeof grpc.status], name).toBe(code);
      expect(grpcStatusName(code)).toBe(name);
    }
    expect(Object.keys(GrpcStatus).length).toBe(Object.keys(grpc.status).length / 2);
    expect(grpcStatusName(99)).toBe('99');
  });
});
