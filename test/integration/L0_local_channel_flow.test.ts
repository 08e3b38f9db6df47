// The local channel's flow control (docs/engine/local-channel.md#flow-control):
// a raw client sends many calls whose answers are large and never reads.
// The engine stops reading that connection once its unsent reply bytes pass
// the limit, so what it buffers stays under the documented bound (the limit
// plus the answers of the calls already open) instead of every answer;
// another connection is served meanwhile; once the client reads, every
// call the engine took is answered, and then the rest. The cap on calls
// open per connection holds the rest unread until calls finish. The
// gateway's end: an engine that stops reading sends its calls to gRPC
// once 4 MiB of requests are unsent, and back once it drains.
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import type { InferRequest } from '../../engine/api/infer-request.ts';
import type { ServerApi } from '../../engine/api/server-api.ts';
import { startLocalServer } from '../../engine/frontends/local/local-server.ts';
import {
  LOCAL_MAX_CALLS_IN_FLIGHT,
  LOCAL_MAX_UNSENT_BYTES,
  localChannelConnections,
  type LocalConnectionStats,
} from '../../net/local/local-server-connection.ts';
import { LOCAL_MAX_UNSENT_REQUEST_BYTES, LocalInferChannel } from '../../net/local/local-infer-channel.ts';
import { encodeHello, encodeWelcome, FRAME_HEADER_BYTES, FrameType, LocalFrameReader } from '../../net/local/local-channel.ts';
import { writeModel } from '../fixtures/test-models.ts';
import { setQuiet } from '../../common/logger.ts';
import { SIMPLE_INFER_REQUEST } from './helpers.ts';
import { requestFrame, startLocalChannelEngine, type LocalChannelEngine } from './local-channel-support.ts';
import { waitFor } from './L0_gateway-support.ts';

/** FP32 elements of js_big's answer: 64 KiB per call. */
const OUT_ELEMS = 16384;
const CALLS = 1200;

const JS_BIG_MODEL = `type T = { datatype: string; shape: number[]; data: Uint8Array };
export async function execute(requests: Array<{ inputs: Record<string, T> }>) {
  return requests.map(() => ({ outputs: { OUTPUT0: { datatype: 'FP32', shape: [${OUT_ELEMS}], data: new Uint8Array(${OUT_ELEMS * 4}) } } }));
}
`;
const JS_BIG_CONFIG = `name: "js_big"
backend: "js"
default_model_filename: "model.ts"
max_batch_size: 0
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ ${OUT_ELEMS} ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
`;

let dir: string;
let lc: LocalChannelEngine;
let engine: RunningEngine;
let sock: string;

const frame = (id: number, msg: object) => requestFrame(id, msg);
const bigCall = (id: number) =>
  frame(id, { model_name: 'js_big', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }], raw_input_contents: [Buffer.alloc(4)] });
const simpleCall = (id: number) => frame(id, SIMPLE_INFER_REQUEST);

beforeAll(async () => {
  setQuiet(true);
  lc = await startLocalChannelEngine('l0-lcf', (repo) => writeModel(repo, 'js_big', JS_BIG_CONFIG, { 'model.ts': JS_BIG_MODEL }));
  ({ engine, sock, dir } = lc);
}, 60_000);

afterAll(async () => {
  await lc?.stop();
});

describe('L0_local_channel_flow: a client that does not read', () => {
  it('bounds what the engine buffers, keeps other connections served, and answers every call once read', async () => {
    const before = new Set(localChannelConnections().map((c) => c.connection));
    const slow = net.connect(sock);
    slow.pause(); // never reads until told
    slow.on('error', () => undefined); // the close says it
    const calls = Array.from({ length: CALLS }, (_, i) => bigCall(i + 1));
    slow.write(Buffer.concat([encodeHello({ version: 1, metadata: {} }), ...calls]));

    // The engine takes calls, answers them into the socket, and stops reading: nothing open, replies unsent.
    const mine = (): LocalConnectionStats | undefined =>
      localChannelConnections().find((c) => !before.has(c.connection) && c.callsAccepted > 0);
    const stalled = await waitFor(
      'the engine to stop reading the slow connection',
      () => {
        const s = mine();
        return s && s.paused && s.callsInFlight === 0 ? s : undefined;
      },
      60_000,
    );
    await new Promise((r) => setTimeout(r, 300));
    const still = mine()!;
    expect(still.callsAccepted).toBe(stalled.callsAccepted); // stays stopped while the client does not read
    expect(still.callsAccepted).toBeLessThan(CALLS);
    const reply = FRAME_HEADER_BYTES + OUT_ELEMS * 4 + 200;
    const bound = LOCAL_MAX_UNSENT_BYTES + LOCAL_MAX_CALLS_IN_FLIGHT * reply;
    expect(still.unsentBytes).toBeGreaterThan(LOCAL_MAX_UNSENT_BYTES); // it was stopped by the bytes, as documented
    expect(still.peakUnsentBytes).toBeLessThanOrEqual(bound);
    expect(bound).toBeLessThan(CALLS * OUT_ELEMS * 4); // the bound means something here

    // Another connection is served meanwhile.
    const other = net.connect(sock);
    const otherFrames: number[] = [];
    const otherReader = new LocalFrameReader(1 << 24);
    other.on('data', (d: Buffer) => otherReader.write(d, (type, id) => type === FrameType.RESPONSE && otherFrames.push(id)));
    other.write(Buffer.concat([encodeHello({ version: 1, metadata: {} }), simpleCall(7)]));
    await waitFor('the other connection to be answered', () => otherFrames.includes(7));
    other.destroy();

    // The client reads: every call is answered, each once.
    const answered = new Map<number, number>();
    const reader = new LocalFrameReader(1 << 24);
    slow.on('data', (d: Buffer) =>
      reader.write(d, (type, id, payload) => {
        if (type === FrameType.RESPONSE) answered.set(id, (answered.get(id) ?? 0) + payload.length);
      }),
    );
    slow.resume();
    await waitFor(`all ${CALLS} calls to be answered`, () => answered.size === CALLS, 60_000);
    const ids = [...answered.keys()].sort((a, b) => a - b);
    expect(ids[0]).toBe(1);
    expect(ids[CALLS - 1]).toBe(CALLS);
    const last = mine()!;
    expect(last.callsAccepted).toBe(CALLS);
    expect(last.paused).toBe(false);
    expect(last.peakUnsentBytes).toBeLessThanOrEqual(bound);
    slow.destroy();
  }, 120_000);
});

describe('L0_local_channel_flow: calls open per connection', () => {
  it('takes no more than maxCallsInFlight at once; the rest run as calls finish', async () => {
    const waiting: Array<() => void> = [];
    const api: ServerApi = Object.create(engine.server, {
      infer: { value: (req: InferRequest) => new Promise<void>((r) => waiting.push(r)).then(() => engine.server.infer(req)) },
    });
    const p = path.join(dir, 'capped.sock');
    const cap = 4;
    const srv = await startLocalServer(api, { path: p, maxCallsInFlight: cap });
    try {
      const before = new Set(localChannelConnections().map((c) => c.connection));
      const c = net.connect(p);
      const got: number[] = [];
      const reader = new LocalFrameReader(1 << 24);
      c.on('data', (d: Buffer) => reader.write(d, (type, id) => type === FrameType.RESPONSE && got.push(id)));
      c.write(Buffer.concat([encodeHello({ version: 1, metadata: {} }), ...Array.from({ length: 20 }, (_, i) => simpleCall(i + 1))]));
      const mine = () => localChannelConnections().find((s) => !before.has(s.connection) && s.callsAccepted > 0);
      await waitFor('the cap to be reached', () => mine()?.paused && waiting.length === cap);
      await new Promise((r) => setTimeout(r, 200));
      expect(mine()!.callsAccepted).toBe(cap);
      expect(waiting.length).toBe(cap);
      // Release calls as they come: all 20 are answered, never more than `cap` open at once.
      let maxOpen = 0;
      await waitFor(
        'all 20 answered',
        () => {
          maxOpen = Math.max(maxOpen, mine()?.callsInFlight ?? 0);
          waiting.splice(0).forEach((go) => go());
          return got.length === 20;
        },
        20_000,
        10,
      );
      expect(maxOpen).toBeLessThanOrEqual(cap);
      expect(new Set(got).size).toBe(20);
      c.destroy();
    } finally {
      await srv.close();
    }
  });
});

describe('L0_local_channel_flow: the gateway end', () => {
  it('an engine that stops reading: calls go to gRPC past the unsent-bytes bound, and back once it drains', async () => {
    const p = path.join(dir, 'stuck.sock');
    let peer: net.Socket | undefined;
    const srv = net.createServer((s) => {
      peer = s;
      s.once('data', () => {
        s.write(encodeWelcome(1, 0xffffffff));
        s.pause(); // reads nothing more
      });
    });
    await new Promise<void>((r) => srv.listen(p, r));
    const ch = new LocalInferChannel(p);
    try {
      const MB = 1 << 20;
      await waitFor('the channel to open', () => ch.usable(MB));
      const msg = Buffer.alloc(MB);
      const failed: Array<Promise<unknown>> = [];
      let refused = 0;
      for (let turn = 0; turn < 10; turn++) {
        for (let i = 0; i < 20; i++) {
          if (!ch.usable(MB)) {
            refused++;
            continue;
          }
          failed.push(ch.call(msg, undefined, undefined).catch((e: { code: number }) => e.code));
          expect(ch.unsentBytes).toBeLessThanOrEqual(LOCAL_MAX_UNSENT_REQUEST_BYTES + 2 * MB);
        }
        await new Promise((r) => setTimeout(r, 20));
      }
      // The kernel's socket buffers take a little; everything else waits under the bound.
      expect(ch.calls).toBeLessThanOrEqual(LOCAL_MAX_UNSENT_REQUEST_BYTES / MB + 4);
      expect(refused).toBeGreaterThan(150);
      peer!.resume(); // the engine reads again
      await waitFor('the channel to drain', () => ch.usable(MB));
      ch.close();
      expect(new Set(await Promise.all(failed))).toEqual(new Set([1])); // CANCELLED by close, none answered
    } finally {
      ch.close();
      peer?.destroy();
      await new Promise((r) => srv.close(r));
    }
  });
});
