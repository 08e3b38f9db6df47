// The own HTTP/2 server's per-turn budgets (net/h2/h2-limits.ts framesPerTurn,
// headerBytesPerTurn; issue 37): a connection handed thousands of frames in
// one read handles a turn's worth, stops reading, and lets the event loop
// serve another connection before it goes on with the rest, in order; the
// common read of a few frames takes no extra turn. And max-control-without-data:
// a PING or SETTINGS flood is cut after that many frames without a request.
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { H2ServerConnection, type H2ServerOptions } from '../../net/h2/h2-connection.ts';
import { Flag, frame, FrameType, H2Error, PREFACE, settingsFrame } from '../../net/h2/h2-frames.ts';
import { DEFAULT_H2_LIMITS } from '../../net/h2/h2-limits.ts';
import type { H2Stream } from '../../net/h2/h2-stream.ts';

const servers: net.Server[] = [];
const sockets: net.Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** Streams never pile up (each is answered at once), and the reset bound is out of the way. */
const OPTS: H2ServerOptions = {
  maxFrameSize: 16_384,
  streamWindow: 65_535,
  connectionWindow: 65_535,
  limits: { maxConcurrentStreams: 100_000, resetBurst: 100_000 },
};

/** A request that opens and ends stream `sid`: POST, http, / from HPACK's static table (3 bytes of block). */
const tinyRequest = (sid: number) => frame(FrameType.HEADERS, Flag.END_HEADERS | Flag.END_STREAM, sid, Buffer.from([0x83, 0x86, 0x84]));

/** A request whose header block is `n` bytes: the three static fields, then a literal x-pad field (RFC 7541 §6.2.2). */
function paddedRequest(sid: number, n: number): Buffer {
  const value = 'p'.repeat(n - 3 - 2 - 5 - 3); // 3 static bytes, 0x00 + name length, "x-pad", a 3-byte value length
  const len = value.length - 127; // 7-bit prefix integer: 127, then the rest in 7-bit groups
  const lit = Buffer.concat([
    Buffer.from([0x00, 5]),
    Buffer.from('x-pad'),
    Buffer.from([0x7f, (len & 0x7f) | 0x80, len >> 7]),
    Buffer.from(value),
  ]);
  return frame(FrameType.HEADERS, Flag.END_HEADERS | Flag.END_STREAM, sid, Buffer.concat([Buffer.from([0x83, 0x86, 0x84]), lit]));
}

/**
 * A server whose streams are logged as `<connection>:<stream id>` in the order they open, the connections named
 * A, B, ... in the order they connect; `onOpen` hears each.
 */
async function loggingServer(onOpen: (entry: string) => void) {
  const log: string[] = [];
  let n = 0;
  const srv = net.createServer((sock) => {
    const name = String.fromCharCode(65 + n++);
    new H2ServerConnection(sock, OPTS, (s: H2Stream) => {
      const entry = `${name}:${s.id}`;
      log.push(entry);
      s.respond([[':status', '200']], true);
      onOpen(entry);
    });
  });
  servers.push(srv);
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return { port: (srv.address() as net.AddressInfo).port, log };
}

/** A raw client, its preface and SETTINGS written, once the server's SETTINGS came (so the connection is set up). */
async function client(port: number): Promise<net.Socket> {
  const s = net.connect(port, '127.0.0.1');
  sockets.push(s);
  s.on('error', () => undefined);
  await new Promise((r) => s.once('connect', r));
  s.write(Buffer.concat([PREFACE, settingsFrame([])]));
  await new Promise((r) => s.once('data', r));
  return s;
}

/** Resolves once `log` holds `want` entries, checked as each stream opens. */
function untilCount(log: string[], want: number, listeners: Array<() => void>): Promise<void> {
  return new Promise((resolve) => listeners.push(() => log.length >= want && resolve()));
}

/**
 * A logging server and two clients: B writes its one request as soon as A's first stream is seen, so it can only be
 * read once A's read has let the event loop go. `until(n)` resolves once n streams are logged.
 */
async function aThenB(): Promise<{ a: net.Socket; log: string[]; until: (want: number) => Promise<void> }> {
  const listeners: Array<() => void> = [];
  let b: net.Socket | undefined;
  const { port, log } = await loggingServer((entry) => {
    if (entry === 'A:1') b!.write(tinyRequest(1));
    for (const l of listeners) l();
  });
  const a = await client(port);
  b = await client(port);
  return { a, log, until: (want) => untilCount(log, want, listeners) };
}

describe('H2ServerConnection per-turn budgets', () => {
  it('a read of thousands of frames is handled a turn at a time: another connection is served before its end, order kept', async () => {
    const { a, log, until } = await aThenB();
    const count = 4000; // 48 KB: one read
    const all = until(count + 1);
    a.write(Buffer.concat(Array.from({ length: count }, (_, i) => tinyRequest(2 * i + 1))));
    await all;
    const aStreams = log.filter((e) => e.startsWith('A:')).map((e) => Number(e.slice(2)));
    expect(aStreams).toEqual(Array.from({ length: count }, (_, i) => 2 * i + 1));
    const bAt = log.indexOf('B:1');
    expect(bAt).toBeGreaterThan(0);
    // Served while A still had most of its read to go (within a few turns' budget of A's first frame).
    expect(bAt).toBeLessThan(log.length - 1);
    expect(bAt).toBeLessThan(10 * DEFAULT_H2_LIMITS.framesPerTurn);
  });

  it('header blocks count against headerBytesPerTurn: large blocks in one write let another connection in between', async () => {
    const { a, log, until } = await aThenB();
    const count = 6; // 6 blocks of 10 KB: under framesPerTurn, over headerBytesPerTurn (16 KiB)
    const all = until(count + 1);
    a.write(Buffer.concat(Array.from({ length: count }, (_, i) => paddedRequest(2 * i + 1, 10_000))));
    await all;
    expect(log.filter((e) => e.startsWith('A:'))).toEqual(Array.from({ length: count }, (_, i) => `A:${2 * i + 1}`));
    expect(log.indexOf('B:1')).toBeLessThan(log.length - 1);
  });

  it('a read of a few frames is handled at once: no turn between them', async () => {
    const { port, log } = await loggingServer(() => undefined);
    const a = await client(port);
    const seen: number[] = [];
    // How many streams had opened at each turn: all 8 appear within one.
    const done = new Promise<void>((resolve) => {
      const watch = () => {
        seen.push(log.length);
        if (log.length >= 8) resolve();
        else setImmediate(watch);
      };
      watch();
    });
    a.write(Buffer.concat(Array.from({ length: 8 }, (_, i) => tinyRequest(2 * i + 1))));
    await done;
    expect(seen.filter((n) => n > 0 && n < 8)).toEqual([]);
  });
});

/** The GOAWAY code `s` receives, or 'open' if it still answers a final PING (whose payload is 'the-end!'). */
function outcome(s: net.Socket): Promise<number | 'open' | 'closed'> {
  return new Promise((resolve) => {
    let buf = Buffer.alloc(0);
    s.on('close', () => resolve('closed'));
    s.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      while (buf.length >= 9 && buf.length >= 9 + buf.readUIntBE(0, 3)) {
        const len = buf.readUIntBE(0, 3);
        const p = buf.subarray(9, 9 + len);
        if (buf[3] === FrameType.GOAWAY) return resolve(p.readUInt32BE(4));
        if (buf[3] === FrameType.PING && p.toString() === 'the-end!') return resolve('open');
        buf = buf.subarray(9 + len);
      }
    });
  });
}

describe('H2ServerConnection max-control-without-data', () => {
  const ping = frame(FrameType.PING, 0, 0, Buffer.alloc(8, 1));
  const last = frame(FrameType.PING, 0, 0, Buffer.from('the-end!'));
  const max = DEFAULT_H2_LIMITS.maxControlWithoutData;

  it('PINGs and SETTINGS past it with no request between get GOAWAY ENHANCE_YOUR_CALM', async () => {
    const { port } = await loggingServer(() => undefined);
    const a = await client(port);
    const got = outcome(a);
    a.write(Buffer.concat([...Array<Buffer>(max / 2).fill(ping), ...Array<Buffer>(max / 2).fill(settingsFrame([])), last]));
    expect(await got).toBe(H2Error.ENHANCE_YOUR_CALM);
  });

  it('as many with requests among them: answered, the connection open', async () => {
    const { port } = await loggingServer(() => undefined);
    const a = await client(port);
    const got = outcome(a);
    const some = Array<Buffer>(max - 10).fill(ping);
    a.write(Buffer.concat([...some, tinyRequest(1), ...some, tinyRequest(3), ...some, last]));
    expect(await got).toBe('open');
  });
});
