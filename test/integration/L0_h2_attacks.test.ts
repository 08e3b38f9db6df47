// The own HTTP/2 front's flood bounds (net/h2/h2-limits.ts, h2-guards.ts),
// each through a live connection to an engine whose TCP gRPC port is the own
// front (issue 37): the attack is cut with the right answer (GOAWAY and its
// code, REFUSED_STREAM, a dropped socket) well before it is done, and another
// client's ModelInfer calls on the same port keep answering meanwhile, every
// one of them. Also issue 41: a gRPC message declared at 1 GiB with 10 bytes
// sent holds no 1 GiB buffer. The short version of `npm run soak -- --attacks`
// (test/bench/soak-attacks.ts, docs/engine/h2-front.md#attack-suite).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TritonGrpcClient, type ModelInferRequest } from '../../client/grpc-client.ts';
import type { RunningEngine } from '../../engine/server/server.ts';
import { Flag, frame, FrameType, H2Error } from '../../net/h2/h2-frames.ts';
import { DEFAULT_H2_LIMITS, type H2Limits } from '../../net/h2/h2-limits.ts';
import { H2_ATTACKS, INFER_PATH, prepareH2Attack, type AttackResult } from '../fixtures/h2-attacks.ts';
import { exchangeFrames } from '../fixtures/h2-outcome.ts';
import { requestFields, headersFrame } from '../fixtures/h2-probe.ts';
import { i32Bytes, removeDir, startTestEngine, tempRepo } from './helpers.ts';

let repo: string;
/** The own front with the default bounds but a short idle timeout (and no max-control-without-data). */
let engine: RunningEngine;
/** The own front where the buffered-bytes bound comes before the queued-control one, and the reconnect penalty is longer. */
let tight: RunningEngine;
const PENALTY_MS = 300;
const IDLE_MS = 1500;

async function ownFront(limits: Partial<H2Limits>): Promise<RunningEngine> {
  return startTestEngine({ modelRepository: repo, transport: { grpcFront: 'own' }, grpcH2Limits: { ...DEFAULT_H2_LIMITS, ...limits } });
}

beforeAll(async () => {
  repo = tempRepo('l0-h2-attacks', ['simple']);
  [engine, tight] = await Promise.all([
    // max-control-without-data off: the PING and SETTINGS floods here are to reach the bounds on queued replies.
    ownFront({ idleTimeoutMs: IDLE_MS, maxControlWithoutData: 1e9 }),
    ownFront({ maxQueuedControl: 1e9, maxBufferedBytes: 1 << 20, maxControlWithoutData: 1e9, floodPenaltyMs: PENALTY_MS }),
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all([engine?.stop(), tight?.stop()]);
  removeDir(repo);
});

const SIMPLE: ModelInferRequest = {
  model_name: 'simple',
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16] },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
  ],
  raw_input_contents: [i32Bytes(Array(16).fill(1)), i32Bytes(Array(16).fill(2))],
};

/** Another client calling ModelInfer in a loop on its own connection while `during` runs: every call must answer. */
async function withOtherClient<T>(port: number, during: () => Promise<T>): Promise<{ result: T; calls: number; failed: number }> {
  const client = new TritonGrpcClient(`127.0.0.1:${port}`);
  await client.modelInfer(SIMPLE);
  let stop = false;
  let calls = 0;
  let failed = 0;
  const loop = (async () => {
    while (!stop) {
      await client.modelInfer(SIMPLE, { timeoutMs: 10_000 }).then(
        () => calls++,
        () => failed++,
      );
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  const result = await during();
  await new Promise((r) => setTimeout(r, 50));
  stop = true;
  await loop;
  client.close();
  return { result, calls, failed };
}

function expectCut(r: AttackResult, answer: string, within: number): void {
  expect(r.answer, JSON.stringify(r)).toBe(answer);
  expect(r.sent, JSON.stringify(r)).toBeLessThan(within);
}

describe('L0_h2_attacks: each flood bound holds on a live connection and other clients keep answering', () => {
  it('rapid reset: HEADERS + RST_STREAM pairs past reset-burst get GOAWAY ENHANCE_YOUR_CALM', async () => {
    const { result, calls, failed } = await withOtherClient(engine.grpcPort, () => H2_ATTACKS['rapid-reset'](engine.grpcPort));
    expectCut(result, 'goaway ENHANCE_YOUR_CALM', 20_000);
    expect(result.sent).toBeGreaterThanOrEqual(DEFAULT_H2_LIMITS.resetBurst);
    expect([calls > 0, failed]).toEqual([true, 0]);
  });

  it('max-concurrent-streams: streams past it get REFUSED_STREAM, then the reset budget cuts the connection', async () => {
    const { result, calls, failed } = await withOtherClient(engine.grpcPort, () => H2_ATTACKS['stream-flood'](engine.grpcPort, 3000));
    expect(result.resets.REFUSED_STREAM, JSON.stringify(result)).toBeGreaterThan(0);
    // The burst, plus what the bucket refilled while the attack ran (33 a second: a loaded machine takes longer).
    const refilled = Math.ceil((DEFAULT_H2_LIMITS.resetsPerSecond * (result.cutMs ?? 0)) / 1000);
    expect(result.resets.REFUSED_STREAM).toBeLessThanOrEqual(DEFAULT_H2_LIMITS.resetBurst + refilled + 1);
    expect(result.answer).toBe('goaway ENHANCE_YOUR_CALM');
    expect([calls > 0, failed]).toEqual([true, 0]);
  });

  it('max-continuations: a header block in more than 8 CONTINUATION frames gets GOAWAY ENHANCE_YOUR_CALM', async () => {
    const { result, failed } = await withOtherClient(engine.grpcPort, () => H2_ATTACKS['continuation-flood'](engine.grpcPort));
    expectCut(result, 'goaway ENHANCE_YOUR_CALM', 2000);
    expect(failed).toBe(0);
  });

  it('max-header-list-bytes: a 24 KB block decoding to 96 MB gets RST_STREAM ENHANCE_YOUR_CALM at once, each time', async () => {
    const { result, calls, failed } = await withOtherClient(engine.grpcPort, () => H2_ATTACKS['header-bomb'](engine.grpcPort, 40));
    expect(result.resets.ENHANCE_YOUR_CALM, JSON.stringify(result)).toBe(40);
    expect([calls > 0, failed]).toEqual([true, 0]);
  });

  it('max-queued-control: PINGs from a client that never reads: the connection is dropped', async () => {
    const { result, failed } = await withOtherClient(engine.grpcPort, () => H2_ATTACKS['ping-flood'](engine.grpcPort));
    expectCut(result, 'dropped', 2_000_000);
    expect(failed).toBe(0);
  }, 60_000);

  it('max-queued-control: SETTINGS from a client that never reads: the connection is dropped', async () => {
    const { result, failed } = await withOtherClient(engine.grpcPort, () => H2_ATTACKS['settings-flood'](engine.grpcPort));
    expectCut(result, 'dropped', 2_000_000);
    expect(failed).toBe(0);
  }, 60_000);

  // The next two run side by side (issue 38): the flood is on the other engine, and the idle connection waits
  // out its own timer (its bounds are 1x and 4x IDLE_MS), so neither counts or times anything of the other's.
  it.concurrent('max-buffered-bytes: replies queued past it for a client that never reads: the connection is dropped', async () => {
    const { result, failed } = await withOtherClient(tight.grpcPort, () => H2_ATTACKS['ping-flood'](tight.grpcPort));
    expectCut(result, 'dropped', 2_000_000);
    expect(failed).toBe(0);
  }, 60_000);

  it.concurrent('idle-timeout-ms: a connection without a stream gets GOAWAY NO_ERROR and is closed', async () => {
    const t0 = performance.now();
    const o = await exchangeFrames(engine.grpcPort, [], 80, IDLE_MS * 4);
    // The closing PING is answered at once; the GOAWAY comes once the connection has been idle IDLE_MS.
    expect(o.alive).toBe(true);
    const idle = await new Promise<{ goaway?: number; ms: number }>((resolve) => {
      void import('node:net').then(({ default: net }) => {
        const s = net.connect(engine.grpcPort, '127.0.0.1');
        let goaway: number | undefined;
        s.on('data', (d: Buffer) => {
          for (let at = 0; at + 9 <= d.length; at += 9 + d.readUIntBE(at, 3))
            if (d[at + 3] === FrameType.GOAWAY) goaway = d.readUInt32BE(at + 9 + 4);
        });
        s.on('close', () => resolve({ goaway, ms: performance.now() - t0 }));
        s.on('error', () => undefined);
        s.write(Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1'), frame(FrameType.SETTINGS, 0, 0)]));
      });
    });
    expect(idle.goaway).toBe(H2Error.NO_ERROR);
    expect(idle.ms).toBeGreaterThanOrEqual(IDLE_MS - 50);
    expect(idle.ms).toBeLessThan(IDLE_MS * 4);
  }, 20_000);

  it("flood-penalty-ms: after each cut the attacker's next connection is read only 1x, then 2x the penalty later; other addresses and open connections at once", async () => {
    const port = tight.grpcPort;
    const attacker = '127.0.0.99';
    /** Connect from `from`; how long until the engine's SETTINGS came (the connection is read from then). */
    const connect = async (from: string) => {
      const t0 = performance.now();
      const a = await prepareH2Attack('rapid-reset', port, undefined, from);
      return { a, ms: performance.now() - t0 };
    };
    const { result, calls, failed } = await withOtherClient(port, async () => {
      const first = await connect(attacker);
      expect((await first.a.go()).answer).toBe('goaway ENHANCE_YOUR_CALM');
      await new Promise((r) => setTimeout(r, 20)); // the engine sees the close (the strike) before the next connect
      const [second, bystander] = await Promise.all([connect(attacker), connect('127.0.0.98')]);
      expect((await second.a.go()).answer).toBe('goaway ENHANCE_YOUR_CALM');
      await new Promise((r) => setTimeout(r, 20));
      const third = await connect(attacker);
      return { first: first.ms, second: second.ms, third: third.ms, bystander: bystander.ms };
    });
    // Lower bounds: the engine's timer guarantees them (the wait counts from the cut, a little before the connect).
    expect(result.second, JSON.stringify(result)).toBeGreaterThanOrEqual(PENALTY_MS - 50);
    expect(result.third, JSON.stringify(result)).toBeGreaterThanOrEqual(2 * PENALTY_MS - 50);
    expect(result.bystander, JSON.stringify(result)).toBeLessThan(result.second);
    expect(result.first, JSON.stringify(result)).toBeLessThan(result.second);
    expect([calls > 0, failed]).toEqual([true, 0]);
  }, 30_000);

  it('issue 41: gRPC messages declared at 1 GiB with 10 bytes sent hold no 1 GiB buffer; each stream is answered at its end', async () => {
    const before = process.memoryUsage();
    const prefix = Buffer.from([0, 0x40, 0, 0, 0]); // 1 GiB declared
    const open = [1, 3, 5, 7, 9, 11, 13, 15].flatMap((sid) => [
      headersFrame(sid, requestFields(INFER_PATH), false),
      frame(FrameType.DATA, 0, sid, Buffer.concat([prefix, Buffer.alloc(10)])),
    ]);
    let during = before;
    const ends = [1, 3, 5, 7, 9, 11, 13, 15].map((sid) => frame(FrameType.DATA, Flag.END_STREAM, sid, Buffer.alloc(0)));
    // Measured once the engine has read every DATA above (its PING answered), while the streams are still open.
    const o = await exchangeFrames(engine.grpcPort, open, 80, 10_000, [ends], () => (during = process.memoryUsage()));
    expect(during).not.toBe(before);
    expect(during.arrayBuffers - before.arrayBuffers).toBeLessThan(64 << 20);
    expect(during.rss - before.rss).toBeLessThan(64 << 20);
    // Each stream ended short of its message: answered (no message, as grpc-js answers), the connection still serving.
    expect(o.alive).toBe(true);
    for (const sid of [1, 3, 5, 7, 9, 11, 13, 15]) expect(o.streams[sid]?.blocks.at(-1)?.join(' ')).toMatch(/grpc-status: (12|13|8)/);
  });
});
