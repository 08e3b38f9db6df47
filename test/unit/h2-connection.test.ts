// The engine's own HTTP/2 server connection (net/h2/h2-connection.ts)
// against node:http2's client over loopback: streams both ways, flow control
// in both directions with small windows, CONTINUATION, resets, PING, SETTINGS
// changes mid-stream and graceful GOAWAY; and against raw bytes: each kind
// of protocol violation gets a GOAWAY with its error code, and random frames
// (fast-check) never throw out of the connection or leave it hanging.
import fc from 'fast-check';
import http2 from 'node:http2';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { H2ServerConnection, type H2ServerOptions } from '../../net/h2/h2-connection.ts';
import { encodeHeaderBlock, Flag, frame, FrameType, H2Error, PREFACE, settingsFrame } from '../../net/h2/h2-frames.ts';
import type { H2Stream } from '../../net/h2/h2-stream.ts';

const servers: net.Server[] = [];
const clients: http2.ClientHttp2Session[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

const SMALL: H2ServerOptions = { maxFrameSize: 16_384, streamWindow: 65_535, connectionWindow: 100_000 };

/** A server whose streams `serve` answers; resolves with its port and the connections it made. */
async function server(serve: (s: H2Stream, c: H2ServerConnection) => void, opts: H2ServerOptions = SMALL) {
  const conns: H2ServerConnection[] = [];
  const srv = net.createServer((sock) => conns.push(new H2ServerConnection(sock, opts, serve)));
  servers.push(srv);
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return { port: (srv.address() as net.AddressInfo).port, conns };
}

/** Echo: the body back, with the request's x-tag and a trailer counting the bytes. */
function echo(s: H2Stream): void {
  let n = 0;
  s.respond([
    [':status', '200'],
    ['x-tag', String(s.headers['x-tag'] ?? '')],
  ]);
  s.onData = (c) => {
    n += c.length;
    s.write(Buffer.from(c));
  };
  s.onEnd = () => s.end([['x-bytes', String(n)]]);
}

function connect(port: number, settings: http2.Settings = {}): http2.ClientHttp2Session {
  const c = http2.connect(`http://127.0.0.1:${port}`, { settings });
  c.on('error', () => undefined);
  clients.push(c);
  return c;
}

function call(c: http2.ClientHttp2Session, body: Buffer, headers: http2.OutgoingHttpHeaders = {}) {
  return new Promise<{ headers: http2.IncomingHttpHeaders; body: Buffer; trailers: http2.IncomingHttpHeaders }>((resolve, reject) => {
    const req = c.request({ ':method': 'POST', ':path': '/echo', ...headers });
    const chunks: Buffer[] = [];
    let h: http2.IncomingHttpHeaders = {};
    let t: http2.IncomingHttpHeaders = {};
    req.on('response', (x) => (h = x));
    req.on('trailers', (x) => (t = x));
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', () => resolve({ headers: h, body: Buffer.concat(chunks), trailers: t }));
    req.on('error', reject);
    req.end(body);
  });
}

describe('H2ServerConnection against node:http2 client', () => {
  it('serves concurrent streams, bodies both ways past every window, with headers and trailers', async () => {
    const { port } = await server(echo);
    // The client's own window is small too, so our answers wait for its WINDOW_UPDATEs.
    const c = connect(port, { initialWindowSize: 16_384 });
    const bodies = [0, 1, 1000, 70_000, 300_000, 1_000_000].map((n) => Buffer.alloc(n, n % 251));
    const res = await Promise.all(bodies.map((b, i) => call(c, b, { 'x-tag': `t${i}` })));
    res.forEach((r, i) => {
      expect(r.headers[':status']).toBe(200);
      expect(r.headers['x-tag']).toBe(`t${i}`);
      expect(r.body.equals(bodies[i]!)).toBe(true);
      expect(r.trailers['x-bytes']).toBe(String(bodies[i]!.length));
    });
  });

  it('decodes header blocks split into CONTINUATION frames and sends large ones split the same way', async () => {
    const big = 'v'.repeat(40_000);
    const { port } = await server((s) => {
      s.respond([
        [':status', '200'],
        ['x-back', String(s.headers['x-big']).length + ''],
        ['x-large', big],
      ]);
      s.onEnd = () => s.end();
    });
    const r = await call(connect(port, { maxHeaderListSize: 1 << 20 }), Buffer.alloc(0), { 'x-big': 'h'.repeat(50_000) });
    expect(r.headers['x-back']).toBe('50000');
    expect(r.headers['x-large']).toBe(big);
  });

  it('a client reset closes the stream as aborted; the connection serves the next stream', async () => {
    const closes: boolean[] = [];
    const { port } = await server((s) => {
      if (s.headers[':path'] === '/hang') s.onClose = (aborted) => closes.push(aborted);
      else echo(s);
    });
    const c = connect(port);
    const req = c.request({ ':method': 'POST', ':path': '/hang' });
    req.on('error', () => undefined);
    req.write('x');
    await new Promise((r) => setTimeout(r, 50));
    req.close(http2.constants.NGHTTP2_CANCEL);
    await expect.poll(() => closes).toEqual([true]);
    expect((await call(c, Buffer.from('after'))).body.toString()).toBe('after');
  });

  it('answers PING, follows SETTINGS changes to the initial window mid-stream', async () => {
    let stream: H2Stream | undefined;
    const { port } = await server((s) => {
      stream = s;
      s.respond([[':status', '200']]);
      s.onEnd = () => undefined;
    });
    const c = connect(port, { initialWindowSize: 1000 });
    await new Promise((r) => c.once('connect', r));
    const rtt = await new Promise<number>((res, rej) => c.ping((err, ms) => (err ? rej(err) : res(ms))));
    expect(rtt).toBeGreaterThanOrEqual(0);
    const req = c.request({ ':method': 'POST', ':path': '/w' });
    const got: Buffer[] = [];
    req.on('data', (d: Buffer) => got.push(d));
    req.end();
    await expect.poll(() => stream).toBeDefined();
    stream!.write(Buffer.alloc(5000, 1));
    await new Promise((r) => setTimeout(r, 100));
    // node's client gives the window back as it reads, so all may arrive; the point is what follows a raise
    c.settings({ initialWindowSize: 1 << 20 });
    stream!.end([['x-done', '1']]);
    await new Promise((r) => req.on('end', r));
    expect(Buffer.concat(got).length).toBe(5000);
  });

  it('shuts down gracefully: the open stream finishes, new streams are refused, the socket closes', async () => {
    const open: H2Stream[] = [];
    const { port, conns } = await server((s) => {
      open.push(s);
      s.respond([[':status', '200']]);
      s.onEnd = () => undefined;
    });
    const c = connect(port);
    const first = c.request({ ':method': 'POST', ':path': '/a' });
    first.on('error', () => undefined);
    const firstBody: Buffer[] = [];
    first.on('data', (d: Buffer) => firstBody.push(d));
    first.end();
    await expect.poll(() => open.length).toBe(1);
    const goaway = new Promise((r) => c.once('goaway', r));
    conns[0]!.shutdown();
    await goaway;
    open[0]!.write(Buffer.from('done'));
    open[0]!.end();
    await new Promise((r) => first.on('end', r));
    expect(Buffer.concat(firstBody).toString()).toBe('done');
    await new Promise((r) => c.once('close', r));
  });
});

/**
 * Raw bytes to a server, then a PING; resolves once the server answered that PING or closed the socket (or after
 * 1 s: `wedged`), with the GOAWAY error code it sent, if any.
 */
async function raw(port: number, bytes: Buffer): Promise<number | undefined> {
  return (await exchange(port, bytes)).goaway;
}

async function exchange(port: number, bytes: Buffer): Promise<{ goaway?: number; pong: boolean; closed: boolean }> {
  const sock = net.connect(port, '127.0.0.1');
  sock.on('error', () => undefined);
  let got = Buffer.alloc(0);
  const marker = Buffer.from('fuzzping');
  const out: { goaway?: number; pong: boolean; closed: boolean } = { pong: false, closed: false };
  const scan = () => {
    for (let at = 0; at + 9 <= got.length; ) {
      const len = got.readUIntBE(at, 3);
      if (at + 9 + len > got.length) break;
      if (got[at + 3] === FrameType.GOAWAY) out.goaway = got.readUInt32BE(at + 13);
      if (got[at + 3] === FrameType.PING && got[at + 4] === Flag.ACK && got.subarray(at + 9, at + 17).equals(marker)) out.pong = true;
      at += 9 + len;
    }
  };
  await new Promise<void>((r) => {
    const t = setTimeout(() => r(), 1000);
    sock.on('data', (d) => {
      got = Buffer.concat([got, d]);
      scan();
      if (out.pong) {
        clearTimeout(t);
        r();
      }
    });
    sock.once('close', () => {
      out.closed = true;
      clearTimeout(t);
      r();
    });
    sock.write(Buffer.concat([bytes, frame(FrameType.PING, 0, 0, marker)]));
  });
  sock.destroy();
  return out;
}

const hello = Buffer.concat([PREFACE, settingsFrame([])]);
const post = encodeHeaderBlock([
  [':method', 'POST'],
  [':path', '/x'],
  [':scheme', 'http'],
]);

describe('H2ServerConnection against protocol violations', () => {
  it('answers each violation with a GOAWAY carrying its error code, and keeps serving other connections', async () => {
    const { port } = await server(echo);
    const cases: Array<[string, Buffer, number]> = [
      ['bad preface', Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'), H2Error.PROTOCOL_ERROR],
      ['DATA on stream 0', frame(FrameType.DATA, 0, 0, Buffer.alloc(3)), H2Error.PROTOCOL_ERROR],
      ['frame over max size', Buffer.from([0x00, 0x40, 0x01, 0, 0, 0, 0, 0, 1]), H2Error.FRAME_SIZE_ERROR],
      ['even stream id', frame(FrameType.HEADERS, Flag.END_HEADERS, 2, post), H2Error.PROTOCOL_ERROR],
      [
        'undecodable header block',
        frame(FrameType.HEADERS, Flag.END_HEADERS, 1, Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0x7f])),
        H2Error.COMPRESSION_ERROR,
      ],
      ['PING of 3 bytes', frame(FrameType.PING, 0, 0, Buffer.alloc(3)), H2Error.FRAME_SIZE_ERROR],
      ['WINDOW_UPDATE of 0', frame(FrameType.WINDOW_UPDATE, 0, 0, Buffer.alloc(4)), H2Error.PROTOCOL_ERROR],
      ['CONTINUATION without HEADERS', frame(FrameType.CONTINUATION, Flag.END_HEADERS, 1, post), H2Error.PROTOCOL_ERROR],
      ['PUSH_PROMISE from a client', frame(FrameType.PUSH_PROMISE, Flag.END_HEADERS, 0, Buffer.alloc(4)), H2Error.PROTOCOL_ERROR],
    ];
    for (const [what, bytes, code] of cases) {
      const sent = what === 'bad preface' ? bytes : Buffer.concat([hello, bytes]);
      expect(await raw(port, sent), what).toBe(code);
    }
    const r = await call(connect(port), Buffer.from('still here'));
    expect(r.body.toString()).toBe('still here');
  });

  it('a peer sending past the windows: the stream is reset past its window, the connection closed past its own', async () => {
    // Handlers that never consume what they are given (a relay whose far side stalls): no credit goes back.
    const stall = (s: H2Stream) => {
      s.manualCredit = true;
    };
    const data = (n: number) => Array.from({ length: n }, () => frame(FrameType.DATA, 0, 1, Buffer.alloc(16_000)));
    const overConnection = await server(stall, { maxFrameSize: 16_384, streamWindow: 1 << 20, connectionWindow: 65_535 });
    expect(await raw(overConnection.port, Buffer.concat([hello, frame(FrameType.HEADERS, Flag.END_HEADERS, 1, post), ...data(5)]))).toBe(
      H2Error.FLOW_CONTROL_ERROR,
    );
    const closes: boolean[] = [];
    const overStream = await server(
      (s) => {
        stall(s);
        s.onClose = (aborted) => closes.push(aborted);
      },
      { maxFrameSize: 16_384, streamWindow: 65_535, connectionWindow: 1 << 20 },
    );
    expect(
      await raw(overStream.port, Buffer.concat([hello, frame(FrameType.HEADERS, Flag.END_HEADERS, 1, post), ...data(5)])),
    ).toBeUndefined();
    expect(closes).toEqual([true]);
  });

  it('random frames after a valid start never throw and never leave the connection wedged (fast-check)', async () => {
    const thrown: unknown[] = [];
    const { port } = await server((s, c) => {
      try {
        echo(s);
      } catch (e) {
        thrown.push(e);
      }
      void c;
    });
    const anyFrame = fc.record({
      type: fc.oneof(fc.integer({ min: 0, max: 9 }), fc.integer({ min: 10, max: 255 })),
      flags: fc.integer({ min: 0, max: 255 }),
      stream: fc.oneof(fc.constant(0), fc.constant(1), fc.constant(3), fc.integer({ min: 0, max: 2 ** 31 - 1 })),
      payload: fc.oneof(fc.uint8Array({ maxLength: 64 }), fc.constant(post), fc.constant(new Uint8Array(8))),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(anyFrame, { maxLength: 12 }), async (frames) => {
        const bytes = Buffer.concat([hello, ...frames.map((f) => frame(f.type, f.flags, f.stream, f.payload))]);
        const r = await exchange(port, bytes);
        // Either it still answers (the PING after the frames) or it closed, after a GOAWAY saying why.
        expect(r.pong || (r.closed && r.goaway !== undefined), JSON.stringify(r)).toBe(true);
      }),
      { numRuns: Number(process.env.FUZZ_RUNS ?? 150) },
    );
    expect(thrown).toEqual([]);
    // After all that, a well-behaved client is served.
    expect((await call(connect(port), Buffer.from('ok'))).body.toString()).toBe('ok');
  }, 120_000);
});
