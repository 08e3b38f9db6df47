// The receive pool (engine/frontends/grpc/receive-pool.ts) and the pooled gRPC message
// decoder (one of the reaches in engine/frontends/grpc/grpc-js-internals.ts): buffers
// are reused only after release, and messages split at any byte boundary
// decode exactly as grpc-js's own decoder assembles them.
import { createRequire } from 'node:module';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { freeCount, POOLED_MAX_BYTES, POOLED_MIN_BYTES, release, take } from '../../engine/frontends/grpc/receive-pool.ts';
import { reachIntoGrpcJs } from '../../engine/frontends/grpc/grpc-js-internals.ts';

const require = createRequire(import.meta.url);
const { StreamDecoder } = require(path.join(path.dirname(require.resolve('@grpc/grpc-js')), 'stream-decoder.js')) as {
  StreamDecoder: new (max: number) => { write(b: Buffer): Buffer[] };
};

/** Install the pooled decoder the way the engine does: on a bound grpc-js server, after its shape check. */
async function installPooledDecoder(): Promise<boolean> {
  const server = new grpc.Server();
  await new Promise<void>((res, rej) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e) => (e ? rej(e) : res())),
  );
  try {
    return reachIntoGrpcJs(server, { widenHttp2: false, pooledDecoder: true });
  } finally {
    server.forceShutdown();
  }
}

/**
 * Empty the pool's free list: the pool is the process's, and the files before this one in its worker (tests run
 * without isolate) may have left buffers there that a take would rightly prefer to the one a case released.
 */
function drainFree(): void {
  while (freeCount() > 0) take(POOLED_MIN_BYTES);
}

function frame(body: Buffer, compressed = 0): Buffer {
  const h = Buffer.alloc(5);
  h[0] = compressed;
  h.writeUInt32BE(body.length, 1);
  return Buffer.concat([h, body]);
}

/** Deterministic pseudo-random bytes. */
function bytes(n: number, seed: number): Buffer {
  const b = Buffer.allocUnsafe(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    b[i] = x & 0xff;
  }
  return b;
}

describe('receive pool', () => {
  it('reuses a released buffer for the next body that fits, never one still out', () => {
    drainFree();
    const a = take(200_000);
    const b = take(200_000);
    expect(a.buffer).not.toBe(b.buffer);
    expect(a.length).toBe(200_000);
    const before = freeCount();
    release(a.subarray(10, 20)); // any view of it will do
    expect(freeCount()).toBe(before + 1);
    release(a); // a second release of the same buffer is ignored
    expect(freeCount()).toBe(before + 1);
    const c = take(150_000);
    expect(c.buffer === a.buffer, 'the released buffer reused').toBe(true);
    expect(c.length).toBe(150_000);
    release(b);
    release(c);
  });

  it('leaves small, huge and foreign buffers alone', () => {
    const before = freeCount();
    const small = take(POOLED_MIN_BYTES - 1);
    const huge = take(POOLED_MAX_BYTES + 1);
    release(small);
    release(huge);
    release(Buffer.alloc(POOLED_MIN_BYTES * 2));
    release(undefined);
    expect(freeCount()).toBe(before);
    expect(small.buffer.byteLength).toBeGreaterThanOrEqual(small.length);
  });

  it('does not keep a buffer that was transferred away (detached)', () => {
    const a = take(100_000);
    const before = freeCount();
    const { port1, port2 } = new MessageChannel();
    port1.postMessage(a.buffer, [a.buffer as ArrayBuffer]);
    port1.close();
    port2.close();
    release(a);
    expect(freeCount()).toBe(before);
  });
});

describe('pooled gRPC message decoder', () => {
  // Reference results from grpc-js's own decoder, taken before the patch.
  const messages = [bytes(0, 1), bytes(7, 2), bytes(POOLED_MIN_BYTES - 5, 3), bytes(300_000, 4), bytes(70_000, 5)];
  const stream = Buffer.concat([...messages.map((m) => frame(m)), frame(bytes(90_000, 6), 1)]);
  const split = (chunk: number) => {
    const parts: Buffer[] = [];
    for (let o = 0; o < stream.length; o += chunk) parts.push(stream.subarray(o, o + chunk));
    return parts;
  };
  const decodeAll = (parts: Buffer[]) => {
    const d = new StreamDecoder(-1);
    return parts.flatMap((p) => d.write(p)).map((b) => Buffer.from(b));
  };
  const reference = decodeAll(split(stream.length));

  it('installs, and decodes every message exactly as grpc-js does at any chunking', async () => {
    expect(reference.length).toBe(6);
    expect(await installPooledDecoder()).toBe(true);
    for (const chunk of [1, 3, 5, 4096, 16_384, 65_536, stream.length]) {
      const got = decodeAll(split(chunk));
      expect(got.length, `chunk ${chunk}`).toBe(reference.length);
      got.forEach((g, i) => expect(g.equals(reference[i]!), `chunk ${chunk}, message ${i}`).toBe(true));
    }
  });

  it('assembles large messages into pool buffers that can be released and reused', async () => {
    await installPooledDecoder();
    drainFree();
    const d = new StreamDecoder(-1);
    const [m] = d.write(frame(bytes(300_000, 9)));
    expect(m!.length).toBe(300_005);
    release(m);
    const [n] = d.write(frame(bytes(250_000, 10)));
    expect(n!.buffer === m!.buffer, 'the released buffer reused').toBe(true);
    expect(n!.subarray(5).equals(bytes(250_000, 10))).toBe(true);
  });

  it("still enforces the receive limit, with grpc-js's text", async () => {
    await installPooledDecoder();
    const d = new StreamDecoder(100);
    expect(() => d.write(frame(bytes(101, 1)))).toThrow('Received message larger than max (101 vs 100)');
  });
});
