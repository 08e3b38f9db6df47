// Triton's L0_decoupled on our engine: its repeat_int32 and square_int32
// models as JS models with the same configs and behaviour
// (test/fixtures/decoupled-repeat-models.ts), alone and in its ensembles
// (simple_repeat, sequence_repeat, fan_repeat, repeat_square, nested_square),
// over a real gRPC stream, with and without Triton's empty final response.
// Each case of decoupled_test.py's DecoupledTest and NonDecoupledTest with
// its expectation: every response, in order, with OUT and IDX; none for an
// empty IN; the interleaving of two requests on one instance that each case
// of test_response_order names; unary infer refused; a shape mismatch named.
// Times are Triton's scaled down (each case says by how much); the orders
// they produce are the same.
//
// Each DecoupledTest case runs at once on every variant Triton's test.sh
// runs it on, each on engines of its own (their own single repeat_int32
// instance, so the variants do not touch each other's timings): the JS
// models, the same with --grpc-max-response-pool-size=1 (Triton's rerun),
// and both again with repeat_int32 and square_int32 as python models
// (Triton's `python` trial). test_one_to_multi_many runs on two more
// variants whose ModelStreamInfer writes wait TRITONSERVER_DELAY_GRPC_RESPONSE's
// delay (the option the engine reads that variable into).
//
// A variant is two engines on the same repository, two lanes, each model's
// runs on one of them (LANE), so that a case's runs go two at a time, each
// still the only one on its engine's repeat_int32 instance, as in Triton's
// sequential test (issue 38: most of the suite's time is the models' delays
// and waits, which this halves). test_response_order runs the squares
// (thousands of responses each) after the order-checked runs of every
// variant, never beside one.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { RunningEngine } from '../../engine/server/server.ts';
import { writeDecoupledRepository } from '../fixtures/decoupled-repeat-models.ts';
import type { StreamPacing } from '../../engine/frontends/grpc/stream-response-pacer.ts';
import { grpcError, httpJson, protoLoaderClient, removeDir, startTestEngine, toI32, type ProtoClient } from './helpers.ts';

const REPEAT_LIKE = ['repeat_int32', 'simple_repeat', 'sequence_repeat'];
const SQUARES = ['repeat_square', 'nested_square'];

/** One engine of a variant. */
interface Lane {
  repo?: string;
  eng?: RunningEngine;
  client?: ProtoClient;
}
interface Variant {
  label: string;
  backend: 'js' | 'python';
  pacing?: StreamPacing;
  lanes: [Lane, Lane];
}
const lanes = (): [Lane, Lane] => [{}, {}];
/** The lane of each model: the runs of a case split about evenly, a square model on each. */
const LANE: Record<string, 0 | 1> = {
  repeat_int32: 0,
  simple_repeat: 0,
  repeat_square: 0,
  sequence_repeat: 1,
  fan_repeat: 1,
  nested_square: 1,
};
const laneOf = (v: Variant, model: string): Lane => v.lanes[LANE[model]!];
/** Triton's write delay (2000 ms) ÷ 50: long enough that a response's lateness shows it (the other times are ÷ 200). */
const WRITE_DELAY_MS = 40;
const VARIANTS: Variant[] = [
  { label: 'js', backend: 'js', lanes: lanes() },
  { label: 'js, --grpc-max-response-pool-size=1', backend: 'js', pacing: { maxResponsePoolSize: 1 }, lanes: lanes() },
  { label: 'python', backend: 'python', lanes: lanes() },
  { label: 'python, --grpc-max-response-pool-size=1', backend: 'python', pacing: { maxResponsePoolSize: 1 }, lanes: lanes() },
];
const DELAYED: Variant[] = [
  { label: 'js, TRITONSERVER_DELAY_GRPC_RESPONSE', backend: 'js', pacing: { delayMs: WRITE_DELAY_MS }, lanes: lanes() },
  { label: 'python, TRITONSERVER_DELAY_GRPC_RESPONSE', backend: 'python', pacing: { delayMs: WRITE_DELAY_MS }, lanes: lanes() },
];

beforeAll(async () => {
  await Promise.all(
    [...VARIANTS, ...DELAYED].flatMap((v) =>
      v.lanes.map(async (l) => {
        l.repo = mkdtempSync(path.join(os.tmpdir(), 'l0-decoupled-'));
        writeDecoupledRepository(l.repo, true, v.backend);
        l.eng = await startTestEngine({ modelRepository: l.repo, grpcStreamPacing: v.pacing });
        l.client = protoLoaderClient(l.eng.grpcPort);
      }),
    ),
  );
}, 120_000);
afterAll(async () => {
  await Promise.all(
    [...VARIANTS, ...DELAYED].flatMap((v) =>
      v.lanes.map(async (l) => {
        l.client?.close();
        await l.eng?.stop();
        removeDir(l.repo);
      }),
    ),
  );
});

/** Run `fn` on each variant at once; a failure names its variant. */
async function onEach(variants: Variant[], fn: (v: Variant) => Promise<void>): Promise<void> {
  await Promise.all(
    variants.map((v) =>
      fn(v).catch((e: Error) => {
        e.message = `[${v.label}] ${e.message}`;
        throw e;
      }),
    ),
  );
}

/** `fn` for each of `models` of a variant: one after another on each lane, the two lanes side by side. */
async function onLanes(models: string[], fn: (model: string) => Promise<void>): Promise<void> {
  await Promise.all(
    ([0, 1] as const).map(async (lane) => {
      for (const m of models) if (LANE[m] === lane) await fn(m);
    }),
  );
}

const u32 = (v: number[]) => Buffer.from(Uint32Array.from(v).buffer);
const i32 = (v: number[]) => Buffer.from(Int32Array.from(v).buffer);

interface Run {
  requestCount: number;
  requestDelay?: number;
  repeatCount?: number;
  delay?: number;
  delayFactor?: number;
  wait?: number;
  emptyFinal?: boolean;
  outputs?: string[];
}
/** One response as the client saw it, in arrival order. */
type Got = { id: string; out?: number; idx?: number; final: boolean; error?: string; at: number };
type StreamMsg = {
  error_message: string;
  infer_response: {
    id: string;
    outputs: Array<{ name: string }>;
    raw_output_contents: Buffer[];
    parameters?: Record<string, { bool_param?: boolean }>;
  };
};

/** decoupled_test.py's _decoupled_infer on one stream of `v` (`model`'s lane), times in ms as given: every message the stream carried. */
function run(v: Variant, model: string, r: Run): Promise<Got[]> {
  const repeat = r.repeatCount ?? 1;
  const values = Array.from({ length: repeat }, (_, i) => 100 + i);
  const got: Got[] = [];
  return new Promise((resolve, reject) => {
    const call = laneOf(v, model).client!.raw.ModelStreamInfer() as grpc.ClientDuplexStream<unknown, StreamMsg>;
    call.on('data', (m) => {
      const res = m.infer_response;
      const at = (name: string) => {
        const k = res.outputs.findIndex((o: { name: string }) => o.name === name);
        return k < 0 ? undefined : toI32(res.raw_output_contents[k]!)[0];
      };
      got.push({
        id: res.id,
        out: at('OUT'),
        idx: at('IDX'),
        final: res.parameters?.triton_final_response?.bool_param === true,
        at: performance.now(),
        ...(m.error_message ? { error: m.error_message } : {}),
      });
    });
    call.on('error', reject);
    call.on('end', () => resolve(got));
    void (async () => {
      let delay = r.delay ?? 100;
      for (let i = 0; i < r.requestCount; i++) {
        // Triton sleeps before the first request too; that shifts every time alike, so it is not waited here.
        if (i > 0) await new Promise((s) => setTimeout(s, r.requestDelay ?? 0));
        call.write({
          model_name: model,
          id: String(i),
          inputs: [
            { name: 'IN', datatype: 'INT32', shape: [repeat] },
            { name: 'DELAY', datatype: 'UINT32', shape: [repeat] },
            { name: 'WAIT', datatype: 'UINT32', shape: [1] },
          ],
          raw_input_contents: [i32(values), u32(values.map(() => delay)), u32([r.wait ?? 50])],
          outputs: (r.outputs ?? ['OUT', 'IDX']).map((name) => ({ name })),
          parameters: r.emptyFinal ? { triton_enable_empty_final_response: { bool_param: true } } : {},
        });
        delay = Math.trunc(delay * (r.delayFactor ?? 1));
      }
      call.end();
    })();
  });
}

/** Each request's responses that carry outputs, with their arrival rank across the stream. */
function byRequest(got: Got[]): Map<string, Array<Got & { rank: number }>> {
  // No response carries an error (one check for the stream: a square run has thousands of responses).
  expect(got.filter((g) => g.error !== undefined)).toEqual([]);
  const m = new Map<string, Array<Got & { rank: number }>>();
  let rank = 0;
  for (const g of got) {
    if (g.out === undefined) continue;
    const list = m.get(g.id) ?? [];
    list.push({ ...g, rank: rank++ });
    m.set(g.id, list);
  }
  return m;
}

/** decoupled_test.py's checks for a repeat-like model: OUT 100.. and IDX 0.. in order, per request; `order`: arrival ranks. */
function expectRepeated(got: Got[], r: Run, order?: number[][]): void {
  const m = byRequest(got);
  const repeat = r.repeatCount ?? 1;
  for (let i = 0; i < r.requestCount; i++) {
    const list = m.get(String(i)) ?? [];
    expect(list.map((g) => g.out)).toEqual(Array.from({ length: repeat }, (_, j) => 100 + j));
    if (r.outputs === undefined) expect(list.map((g) => g.idx)).toEqual(Array.from({ length: repeat }, (_, j) => j));
    if (order) expect(list.map((g) => g.rank)).toEqual(order[i]);
  }
  if (r.emptyFinal) expect(got.filter((g) => g.final)).toHaveLength(r.requestCount);
}

/** _nested_validate: value v repeated v times, for v = 100...; _fan_validate: 200, 202, ... */
function expectSquares(got: Got[], r: Run): void {
  const m = byRequest(got);
  const repeat = r.repeatCount ?? 1;
  const want = Array.from({ length: repeat }, (_, j) => 100 + j).flatMap((v) => Array.from({ length: v }, () => v));
  for (let i = 0; i < r.requestCount; i++) expect((m.get(String(i)) ?? []).map((g) => g.out)).toEqual(want);
}
function expectFan(got: Got[], r: Run): void {
  const m = byRequest(got);
  for (let i = 0; i < r.requestCount; i++) {
    expect((m.get(String(i)) ?? []).map((g) => g.out)).toEqual(Array.from({ length: r.repeatCount ?? 1 }, (_, j) => 2 * (100 + j)));
  }
}

/**
 * Run `r` on every trial of DecoupledTest, each with its validation; the
 * repeat-like ones also with the empty final response (Triton's second
 * helper; for time, not the fan and square ones, whose responses it does not change).
 */
async function everyTrial(v: Variant, r: Run): Promise<void> {
  await onLanes([...REPEAT_LIKE, 'fan_repeat', ...SQUARES], async (m) => {
    if (m === 'fan_repeat') expectFan(await run(v, m, { ...r, outputs: ['OUT'] }), r);
    else if (SQUARES.includes(m)) expectSquares(await run(v, m, { ...r, outputs: ['OUT'] }), r);
    else for (const emptyFinal of [false, true]) expectRepeated(await run(v, m, { ...r, emptyFinal }), { ...r, emptyFinal });
  });
}

// Triton's times ÷ 100 or ÷ 200 (delay 1000 ms, waits 500 / 2000 / 10000 ms): each case keeps their proportions,
// and what these cases check (each request's responses, in order) does not hang on the times.
// The two suites run side by side (describe.concurrent, each case in them still in turn: it.sequential), each on
// engines of its own: NonDecoupledTest's few requests mostly wait for its model's sleeps.
describe.concurrent('L0_decoupled: DecoupledTest', () => {
  it.sequential('test_one_to_none: no response for an empty IN', async () => {
    await onEach(VARIANTS, (v) =>
      onLanes([...REPEAT_LIKE, 'fan_repeat', ...SQUARES], async (m) => {
        for (const requestCount of [1, 5]) {
          const got = await run(v, m, { requestCount, repeatCount: 0, outputs: REPEAT_LIKE.includes(m) ? undefined : ['OUT'] });
          expect(got.filter((g) => g.out !== undefined || g.error)).toEqual([]);
        }
      }),
    );
  }, 60_000);

  it.sequential('test_one_to_one: one response each, released before or after it is sent', async () => {
    await onEach(VARIANTS, async (v) => {
      for (const requestCount of [1, 5]) for (const wait of [5, 20]) await everyTrial(v, { requestCount, delay: 10, wait });
    });
  }, 60_000);

  // test_one_to_many and test_one_to_multi_many run side by side (it.concurrent): they use different engines
  // (VARIANTS, DELAYED), and neither times anything against the other: what they check is each request's
  // responses in order (sent one after another by one model task) and a lower bound on the delayed write.
  it.concurrent('test_one_to_many: five responses each, released before, during or after them', async () => {
    await onEach(VARIANTS, async (v) => {
      for (const requestCount of [1, 5])
        for (const wait of [3, 10, 50]) await everyTrial(v, { requestCount, repeatCount: 5, delay: 5, wait });
    });
  }, 120_000);

  // Triton's waits 500 / 8000 / 20000 (one request) and 500 / 3000 / 10000 ms (five), ÷ 200; every write waits WRITE_DELAY_MS.
  it.concurrent('test_one_to_multi_many: five responses each, written behind a delayed write (TRITONSERVER_DELAY_GRPC_RESPONSE)', async () => {
    await onEach(DELAYED, async (v) => {
      // The hook is on: a response the model sends at once reaches the client no sooner than the write delay
      // (the least of three warm runs: without the hook it takes a few ms).
      const once = { requestCount: 1, repeatCount: 1, delay: 0, wait: 0 };
      const lateness: number[] = [];
      for (let i = 0; i < 4; i++) {
        const t0 = performance.now();
        const [first] = await run(v, 'repeat_int32', once);
        if (i > 0) lateness.push(first!.at - t0);
      }
      expect(Math.min(...lateness)).toBeGreaterThanOrEqual(WRITE_DELAY_MS - 1);
      for (const wait of [3, 40, 100]) await everyTrial(v, { requestCount: 1, repeatCount: 5, delay: 5, wait });
      for (const wait of [3, 15, 50]) await everyTrial(v, { requestCount: 5, repeatCount: 5, delay: 5, wait });
    });
  }, 120_000);

  // The arrival order of the 8 responses of two requests on one instance is each case's expectation.
  // Triton's times × 0.1 (the first three), × 0.025 (the last two): each keeps ≥ 50 ms between the responses it orders.
  it.sequential.each([
    [
      'interleaved',
      { requestDelay: 50, delay: 100, wait: 50 },
      [
        [0, 2, 4, 6],
        [1, 3, 5, 7],
      ],
    ],
    [
      'the second request first',
      { requestDelay: 50, delay: 200, delayFactor: 0.1, wait: 50 },
      [
        [4, 5, 6, 7],
        [0, 1, 2, 3],
      ],
    ],
    [
      'the second inside the first',
      { requestDelay: 250, delay: 200, delayFactor: 0.1, wait: 50 },
      [
        [0, 5, 6, 7],
        [1, 2, 3, 4],
      ],
    ],
    [
      'the first before the second (sent early)',
      { requestDelay: 2, delay: 12, delayFactor: 10, wait: 12 },
      [
        [0, 1, 2, 3],
        [4, 5, 6, 7],
      ],
    ],
    [
      'the first before the second (sent late)',
      { requestDelay: 18, delay: 12, delayFactor: 10, wait: 12 },
      [
        [0, 1, 2, 3],
        [4, 5, 6, 7],
      ],
    ],
  ])(
    'test_response_order: %s',
    async (_, times, order) => {
      const r = { requestCount: 2, repeatCount: 4, ...times };
      // The order-checked runs (and fan_repeat's few responses) on every variant first, then the squares.
      await onEach(VARIANTS, (v) =>
        onLanes([...REPEAT_LIKE, 'fan_repeat'], async (m) => {
          if (m === 'fan_repeat') expectFan(await run(v, m, { ...r, outputs: ['OUT'] }), r);
          else expectRepeated(await run(v, m, r), r, order);
        }),
      );
      await onEach(VARIANTS, (v) => onLanes(SQUARES, async (m) => expectSquares(await run(v, m, { ...r, outputs: ['OUT'] }), r)));
    },
    60_000,
  );

  it.sequential('test_no_streaming: unary gRPC and HTTP refuse a decoupled model', async () => {
    const inputs = [
      { name: 'IN', datatype: 'INT32', shape: [1] },
      { name: 'DELAY', datatype: 'UINT32', shape: [1] },
      { name: 'WAIT', datatype: 'UINT32', shape: [1] },
    ];
    await onEach(VARIANTS, async (v) => {
      const lane = laneOf(v, 'repeat_int32');
      const e = await grpcError(
        lane.client!.call('ModelInfer', { model_name: 'repeat_int32', inputs, raw_input_contents: [i32([100]), u32([100]), u32([200])] }),
      );
      expect(e.details).toContain("doesn't support models with decoupled transaction policy");
      const http = await httpJson(lane.eng!.httpPort, 'POST', '/v2/models/repeat_int32/infer', {
        inputs: inputs.map((t, k) => ({ ...t, data: [[100], [100], [200]][k] })),
      });
      expect(String(http.json.error)).toContain("doesn't support models with decoupled transaction policy");
    });
  });

  it.sequential('test_wrong_shape: IN and DELAY of different shapes are named', async () => {
    await onEach(VARIANTS, async (v) => {
      const got: string[] = [];
      await new Promise<void>((resolve, reject) => {
        const call = laneOf(v, 'repeat_int32').client!.raw.ModelStreamInfer() as grpc.ClientDuplexStream<unknown, StreamMsg>;
        call.on('data', (m) => got.push(m.error_message));
        call.on('error', reject);
        call.on('end', resolve);
        call.write({
          model_name: 'repeat_int32',
          inputs: [
            { name: 'IN', datatype: 'INT32', shape: [1] },
            { name: 'DELAY', datatype: 'UINT32', shape: [2] },
            { name: 'WAIT', datatype: 'UINT32', shape: [1] },
          ],
          raw_input_contents: [i32([100]), u32([100, 100]), u32([200])],
        });
        call.end();
      });
      expect(got).toEqual(['expected IN and DELAY shape to match, got [1] and [2]']);
    });
  });
});

describe.concurrent('L0_decoupled: NonDecoupledTest (repeat_int32 with decoupled: False)', () => {
  let repo2: string;
  let eng2: RunningEngine;
  let client2: ProtoClient;
  beforeAll(async () => {
    repo2 = mkdtempSync(path.join(os.tmpdir(), 'l0-nondecoupled-'));
    writeDecoupledRepository(repo2, false);
    eng2 = await startTestEngine({ modelRepository: repo2 });
    client2 = protoLoaderClient(eng2.grpcPort);
  }, 60_000);
  afterAll(async () => {
    client2?.close();
    await eng2?.stop();
    removeDir(repo2);
  });

  // data_matrix: (IN, DELAY, WAIT) with Triton's ms ÷ 10.
  const matrix = [
    [1, 0, 0],
    [1, 400, 200],
    [1, 200, 400],
  ];
  const req = ([v, d, w]: number[]) => ({
    model_name: 'repeat_int32',
    inputs: [
      { name: 'IN', datatype: 'INT32', shape: [1] },
      { name: 'DELAY', datatype: 'UINT32', shape: [1] },
      { name: 'WAIT', datatype: 'UINT32', shape: [1] },
    ],
    raw_input_contents: [i32([v!]), u32([d!]), u32([w!])],
  });

  it.sequential('test_grpc and test_grpc_async: one response, OUT 1 and IDX 0', async () => {
    for (const row of matrix) {
      const r = await client2.call('ModelInfer', req(row));
      expect([toI32(r.raw_output_contents![0]!)[0], toI32(r.raw_output_contents![1]!)[0]]).toEqual([1, 0]);
    }
    const all = await Promise.all(matrix.map((row) => client2.call('ModelInfer', req(row))));
    expect(all.map((r) => toI32(r.raw_output_contents![0]!)[0])).toEqual([1, 1, 1]);
  });

  it.sequential('test_http: one response, OUT 1 and IDX 0', async () => {
    for (const [v, d, w] of matrix) {
      const r = await httpJson(eng2.httpPort, 'POST', '/v2/models/repeat_int32/infer', {
        inputs: [
          { name: 'IN', datatype: 'INT32', shape: [1], data: [v] },
          { name: 'DELAY', datatype: 'UINT32', shape: [1], data: [d] },
          { name: 'WAIT', datatype: 'UINT32', shape: [1], data: [w] },
        ],
      });
      expect((r.json.outputs as Array<{ name: string; data: number[] }>).map((o) => [o.name, o.data[0]])).toEqual([
        ['OUT', 1],
        ['IDX', 0],
      ]);
    }
  });

  it.sequential('test_grpc_async_cancel: a request cancelled while it runs answers CANCELLED; the model stays ready', async () => {
    for (const row of [
      [1, 400, 200],
      [1, 200, 400],
    ]) {
      let call: grpc.ClientUnaryCall | undefined;
      const outcome = new Promise<number | undefined>((resolve) => {
        call = client2.raw.ModelInfer(req(row), (err: grpc.ServiceError | null) => resolve(err?.code)) as grpc.ClientUnaryCall;
      });
      await new Promise((s) => setTimeout(s, 50));
      call!.cancel();
      expect(await outcome).toBe(grpc.status.CANCELLED);
      const ready = await client2.call('ModelReady', { name: 'repeat_int32' });
      expect(ready.ready).toBe(true);
    }
    // The instance is free again: the next request answers.
    const r = await client2.call('ModelInfer', req([1, 0, 0]));
    expect(toI32(r.raw_output_contents![0]!)[0]).toBe(1);
  });
});
