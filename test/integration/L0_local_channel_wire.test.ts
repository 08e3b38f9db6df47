// The local channel's engine end on the wire (docs/engine/local-channel.md):
// a real engine's --local-socket spoken to with raw frames. A client of
// another version is refused with a reason; garbage, an oversized length,
// a frame before HELLO or a truncated frame end only that connection, with
// an ERROR naming what was wrong, while other connections keep working.
// Cancellation: a CANCEL, a closed connection and a client deadline abort
// the engine request's signal (as L0_grpc_cancel does for gRPC); an answered
// call's never is. The socket file is mode 0600 and gone after stop.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalServer } from '../../engine/frontends/local/local-server.ts';
import type { InferRequest } from '../../engine/api/infer-request.ts';
import type { ServerApi } from '../../engine/api/server-api.ts';
import type { RunningEngine } from '../../engine/server/server.ts';
import { cancelled } from '../../engine/api/status.ts';
import { LocalInferChannel } from '../../net/local/local-infer-channel.ts';
import { inferenceService } from '../../protocol/index.ts';
import { decodeError, encodeFrame, encodeHello, FrameType, LocalFrameReader } from '../../net/local/local-channel.ts';
import { setQuiet } from '../../common/logger.ts';
import { SIMPLE_INFER_REQUEST } from './helpers.ts';
import { requestFrame, startLocalChannelEngine, type LocalChannelEngine } from './local-channel-support.ts';
import { waitFor } from './L0_gateway-support.ts';

const INFER = inferenceService().ModelInfer!;
let dir: string;
let lc: LocalChannelEngine;
let engine: RunningEngine;
let sock: string;

const simpleReq = SIMPLE_INFER_REQUEST;

interface Frame {
  type: number;
  id: number;
  payload: Buffer;
}

/** A raw connection: what it writes, the frames it reads, and when it closes. */
function raw(p: string) {
  const s = net.connect(p);
  const frames: Frame[] = [];
  const reader = new LocalFrameReader(1 << 24);
  s.on('data', (d: Buffer) => reader.write(d, (type, id, payload) => frames.push({ type, id, payload: Buffer.from(payload) })));
  s.on('error', () => undefined); // a reset after the engine closes: the close says it
  const closed = new Promise<void>((r) => s.once('close', () => r()));
  return { s, frames, closed, frame: (type: number) => waitFor(`a frame of type ${type}`, () => frames.find((f) => f.type === type)) };
}

const request = (id: number, timeoutMs = 0) => requestFrame(id, simpleReq, timeoutMs);

beforeAll(async () => {
  setQuiet(true);
  lc = await startLocalChannelEngine('l0-lcw');
  ({ engine, sock, dir } = lc);
}, 60_000);

afterAll(async () => {
  await lc?.stop();
});

describe('L0_local_channel_wire: handshake and bad input', () => {
  it('the socket file is mode 0600', () => {
    expect(fs.statSync(sock).mode & 0o777).toBe(0o600);
  });

  it('answers a well-formed call with the ModelInferResponse bytes', async () => {
    const c = raw(sock);
    c.s.write(Buffer.concat([encodeHello({ version: 1, metadata: {} }), request(5)]));
    const res = await c.frame(FrameType.RESPONSE);
    expect(res.id).toBe(5);
    const out = INFER.responseDeserialize(res.payload) as { raw_output_contents: Buffer[] };
    expect(out.raw_output_contents[0]!.readInt32LE(0)).toBe(3);
    c.s.destroy();
  });

  const bad: Array<[string, Buffer, RegExp, number]> = [
    [
      'another protocol version',
      encodeHello({ version: 99, metadata: {} }),
      /^local channel protocol version 99 is not supported \(this engine speaks 1\)$/,
      12,
    ],
    ['an HTTP request', Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'), /protocol error: unknown frame type 0x2f/, 13],
    ['a REQUEST before HELLO', request(1), /protocol error: expected HELLO first, got REQUEST/, 13],
    [
      'a HELLO without the magic',
      encodeFrame(FrameType.HELLO, 0, Buffer.from('nope nope')),
      /protocol error: HELLO does not start with the magic TRLC/,
      13,
    ],
    [
      'an oversized length',
      Buffer.concat([encodeHello({ version: 1, metadata: {} }), Buffer.from([0xff, 0xff, 0xff, 0xff, 3])]),
      /protocol error: REQUEST frame of 4294967295 bytes exceeds the limit of \d+/,
      13,
    ],
    [
      'a RESPONSE from a client',
      Buffer.concat([encodeHello({ version: 1, metadata: {} }), encodeFrame(FrameType.RESPONSE, 1)]),
      /protocol error: unexpected RESPONSE frame from a client/,
      13,
    ],
    ['a REQUEST with call id 0', Buffer.concat([encodeHello({ version: 1, metadata: {} }), request(0)]), /call id 0, reserved/, 13],
    [
      'a REQUEST too short for its fields',
      Buffer.concat([encodeHello({ version: 1, metadata: {} }), encodeFrame(FrameType.REQUEST, 3, Buffer.from([0, 0]))]),
      /shorter than its 6 fixed bytes/,
      13,
    ],
  ];
  it.each(bad)('%s: an ERROR on call 0 naming it, that connection closed, the others unharmed', async (_n, bytes, text, code) => {
    const good = raw(sock);
    good.s.write(encodeHello({ version: 1, metadata: {} }));
    await good.frame(FrameType.WELCOME);
    const c = raw(sock);
    c.s.write(bytes);
    await c.closed;
    const err = c.frames.find((f) => f.type === FrameType.ERROR);
    expect(err?.id).toBe(0);
    const e = decodeError(err!.payload) as { code: number; message: string };
    expect(e.message).toMatch(text);
    expect(e.code).toBe(code);
    good.s.write(request(9));
    expect((await good.frame(FrameType.RESPONSE)).id).toBe(9);
    good.s.destroy();
  });

  it('a truncated frame and a hang-up leave the engine serving', async () => {
    const c = raw(sock);
    c.s.end(Buffer.concat([encodeHello({ version: 1, metadata: {} }), request(4).subarray(0, 20)]));
    await c.closed;
    const ch = new LocalInferChannel(sock);
    await waitFor('the channel to open', () => ch.usable(10));
    expect(
      (INFER.responseDeserialize(await ch.call(INFER.requestSerialize(simpleReq), 2000, undefined)) as { model_name: string }).model_name,
    ).toBe('simple');
    ch.close();
  });
});

describe('L0_local_channel_wire: cancellation reaches the engine request', () => {
  it('CANCEL, a closed connection and a client deadline abort the request; an answered one is not, and carries its traceparent', async () => {
    let seen: ((r: InferRequest) => void) | undefined;
    let arrived = new Promise<InferRequest>((r) => (seen = r));
    let hold = true;
    const api: ServerApi = Object.create(engine.server, {
      infer: {
        value: (req: InferRequest) => {
          seen!(req);
          if (!hold) return engine.server.infer(req);
          return new Promise((_res, rej) => req.signal!.addEventListener('abort', () => rej(cancelled('client went away'))));
        },
      },
    });
    const p = path.join(dir, 'held.sock');
    const srv = await startLocalServer(api, { path: p });
    const aborted = (req: InferRequest) =>
      new Promise<void>((r) => (req.signal!.aborted ? r() : req.signal!.addEventListener('abort', () => r())));
    try {
      // CANCEL frame
      const c = raw(p);
      c.s.write(Buffer.concat([encodeHello({ version: 1, metadata: {} }), request(1)]));
      let req = await arrived;
      expect(req.signal!.aborted).toBe(false);
      c.s.write(encodeFrame(FrameType.CANCEL, 1));
      await aborted(req);
      // connection closed with a call open
      arrived = new Promise<InferRequest>((r) => (seen = r));
      c.s.write(request(2));
      req = await arrived;
      c.s.destroy();
      await aborted(req);
      // the client's deadline (the engine's own is the same here; either aborts it)
      arrived = new Promise<InferRequest>((r) => (seen = r));
      const ch = new LocalInferChannel(p);
      await waitFor('the channel to open', () => ch.usable(10));
      const failed = ch.call(INFER.requestSerialize(simpleReq), 150, undefined).catch((e: { code: number }) => e.code);
      req = await arrived;
      expect(await failed).toBe(4);
      await aborted(req);
      // an answered call is never aborted; its traceparent reaches the request
      hold = false;
      arrived = new Promise<InferRequest>((r) => (seen = r));
      const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
      await ch.call(INFER.requestSerialize(simpleReq), 2000, tp);
      req = await arrived;
      expect(req.traceparent).toBe(tp);
      await new Promise((r) => setTimeout(r, 50));
      expect(req.signal!.aborted).toBe(false);
      // a call in flight when the engine goes away fails UNAVAILABLE (the gateway's 503)
      hold = true;
      arrived = new Promise<InferRequest>((r) => (seen = r));
      const dropped = ch.call(INFER.requestSerialize(simpleReq), 5000, undefined).catch((e: { code: number }) => e.code);
      await arrived;
      await srv.close();
      expect(await dropped).toBe(14);
      expect(fs.existsSync(p)).toBe(false);
      ch.close();
    } finally {
      await srv.close();
    }
  });
});
