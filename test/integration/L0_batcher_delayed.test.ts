// Triton's L0_batcher cases that need TRITONSERVER_DELAY_SCHEDULER (the
// hook holds a model's first N requests until N are queued, so the batches
// come out the same on any machine): each case's requests, hold count,
// preferred sizes and expected batches (batch size -> executions, requests,
// inferences) are Triton's batcher_test.py ones, on ONNX Runtime with fixed
// and variable dims. Triton's 10 s max_queue_delay is scaled down to 1 s;
// a request expected to wait for the queue delay must take between 1 and
// 1.5 of it (Triton's bound), as Triton checks. Each case has its own copy
// of the model (explicit model control), loaded before the cases with the hook
// set to the case's count (the hook is read at load, from the environment, so
// the loads go one at a time); the cases run at the same time, each once its
// model is in, on its own model and stats, each judged against its own bounds.
import { afterAll, beforeAll, describe, it, type ExpectStatic } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { ElemType, GraphBuilder } from '../../model_repository/onnx-builder.ts';
import { writeModel } from '../fixtures/test-models.ts';
import { httpJson, removeDir, startTestEngine, tempRepo } from './helpers.ts';

const DELAY_MS = 1000;

/** OUTPUT0 = INPUT0 * 2 + 1, FP32 [batch, n]. */
function buildDoublePlusOne(): Uint8Array {
  const g = new GraphBuilder('double_plus_one', 1);
  g.input('INPUT0', ElemType.FLOAT, ['b', 'n']);
  const m = g.node('Mul', ['INPUT0', g.constFloat('two', [], [2])]);
  g.node('Add', [m, g.constFloat('one', [], [1])], {}, 'OUTPUT0');
  g.output('OUTPUT0', ElemType.FLOAT, ['b', 'n']);
  return g.build();
}

const config = (name: string, dims: string, batching: string) => `name: "${name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ ${dims} ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ ${dims} ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
dynamic_batching { ${batching} }
`;
const DELAYED = `preferred_batch_size: [ 2, 6 ] max_queue_delay_microseconds: ${DELAY_MS * 1000}`;
const PREFERRED_ONLY = 'preferred_batch_size: [ 4, 6 ]';

/** One request: batch size, the input's per-row size, when to send it (ms after the case starts), and its latency bounds. */
interface Send {
  batch: number;
  size?: number;
  at?: number;
  /** Latency at most this (ms), and at least `min` when given. */
  max: number;
  min?: number;
}
interface Case {
  hold: number;
  batching: string;
  sends: Send[];
  /** Triton's expected batch size -> executions, requests and inferences. */
  batches: Record<number, number>;
  requests: number;
  inferences: number;
  variableOnly?: boolean;
}
const quick = (batch: number, at = 0): Send => ({ batch, at, max: DELAY_MS * 0.6 + 2000 });
const waits = (batch: number, at = 0): Send => ({ batch, at, max: DELAY_MS * 1.5 + 1500, min: DELAY_MS });

const CASES: Record<string, Case> = {
  test_multi_batch_delayed_sum_gt_max_preferred: {
    hold: 2,
    batching: DELAYED,
    sends: [quick(3), waits(4, 300)],
    batches: { 3: 1, 4: 1 },
    requests: 2,
    inferences: 7,
  },
  test_multi_batch_use_biggest_preferred: {
    hold: 6,
    batching: DELAYED,
    sends: [1, 1, 1, 1, 1, 1].map((b) => quick(b)),
    batches: { 6: 1 },
    requests: 6,
    inferences: 6,
  },
  test_multi_batch_use_best_preferred: {
    hold: 3,
    batching: DELAYED,
    sends: [quick(1), quick(1), waits(1, 300)],
    batches: { 2: 1, 1: 1 },
    requests: 3,
    inferences: 3,
  },
  test_multi_batch_delayed_use_max_batch: {
    // The third request comes after more than the queue delay: the held two (3 + 4) wait for it, then 8 = max batch goes at once.
    hold: 3,
    batching: DELAYED,
    sends: [
      { batch: 3, max: DELAY_MS * 1.5 + 1500, min: DELAY_MS },
      { batch: 4, max: DELAY_MS * 1.5 + 1500, min: DELAY_MS },
      quick(1, DELAY_MS * 1.1),
    ],
    batches: { 8: 1 },
    requests: 3,
    inferences: 8,
  },
  test_multi_batch_delayed_preferred_different_shape: {
    hold: 4,
    batching: DELAYED,
    variableOnly: true,
    sends: [
      { ...quick(1), size: 16 },
      { ...quick(3), size: 16 },
      { ...quick(1, 300), size: 8 },
      { ...quick(5, 300), size: 8 },
    ],
    batches: { 4: 1, 6: 1 },
    requests: 4,
    inferences: 10,
  },
  test_preferred_batch_only_aligned: {
    hold: 4,
    batching: PREFERRED_ONLY,
    sends: [1, 1, 1, 1].map((b) => quick(b)),
    batches: { 4: 1 },
    requests: 4,
    inferences: 4,
  },
  test_preferred_batch_only_unaligned: {
    hold: 5,
    batching: PREFERRED_ONLY,
    sends: [1, 1, 1, 1, 1].map((b) => quick(b)),
    batches: { 4: 1, 1: 1 },
    requests: 5,
    inferences: 5,
  },
  test_preferred_batch_only_use_biggest_preferred: {
    hold: 7,
    batching: PREFERRED_ONLY,
    sends: [1, 1, 1, 1, 1, 1, 1].map((b) => quick(b)),
    batches: { 6: 1, 1: 1 },
    requests: 7,
    inferences: 7,
  },
  test_preferred_batch_only_use_no_preferred_size: {
    hold: 3,
    batching: PREFERRED_ONLY,
    sends: [1, 1, 1].map((b) => quick(b)),
    batches: { 3: 1 },
    requests: 3,
    inferences: 3,
  },
};

const TYPES = { FIXED: '16', VARIABLE: '-1' } as const;
const modelName = (test: string, type: string) => `${test.replace(/^test_/, '')}_${type.toLowerCase()}`;

const cases = Object.entries(CASES).flatMap(([test, c]) =>
  Object.keys(TYPES)
    .filter((t) => !(c.variableOnly && t === 'FIXED'))
    .map((type) => [test, type, c] as const),
);

let repo: string;
let eng: RunningEngine;
/** Each case's model, loaded with the case's hold count. */
const loaded = new Map<string, Promise<void>>();
beforeAll(async () => {
  repo = tempRepo('l0-batcher-delayed');
  const onnx = buildDoublePlusOne();
  for (const [test, c] of Object.entries(CASES)) {
    for (const [type, dims] of Object.entries(TYPES)) {
      if (c.variableOnly && type === 'FIXED') continue;
      writeModel(repo, modelName(test, type), config(modelName(test, type), dims, c.batching), { 'model.onnx': onnx });
    }
  }
  eng = await startTestEngine({ modelRepository: repo, controlMode: 'explicit' });
  // One load after the other (the hook is read from the environment at load); a case starts once its own model is in.
  let chain = Promise.resolve();
  for (const [test, type, c] of cases) {
    chain = chain.then(async () => {
      process.env.TRITONSERVER_DELAY_SCHEDULER = String(c.hold);
      try {
        await eng.server.loadModel(modelName(test, type));
      } finally {
        delete process.env.TRITONSERVER_DELAY_SCHEDULER;
      }
    });
    chain.catch(() => undefined); // a failed load fails its own case (and the ones after it), awaited there
    loaded.set(modelName(test, type), chain);
  }
}, 60_000);
afterAll(async () => {
  await Promise.allSettled(loaded.values());
  delete process.env.TRITONSERVER_DELAY_SCHEDULER;
  await eng?.stop();
  if (repo) removeDir(repo);
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Poll until `model` holds at least `n` requests (the hook holds them all, so they are still in flight). */
async function untilQueued(model: string, n: number): Promise<void> {
  const scheduler = eng.engine.repository.readyVersion(model)!.scheduler;
  for (const end = Date.now() + 10_000; scheduler.inflightCount() < n; await sleep(5)) {
    if (Date.now() > end) throw new Error(`${model}: ${scheduler.inflightCount()} of ${n} earlier requests queued after 10 s`);
  }
}

/**
 * Send one request after `at` ms, and not before the `earlier` requests sent
 * before it are queued (on a loaded host a later request must not overtake
 * them); check its answer (2x+1 per element) and return its latency.
 */
async function send(expect: ExpectStatic, model: string, s: Send, earlier: number): Promise<number> {
  await sleep(s.at ?? 0);
  if (earlier > 0) await untilQueued(model, earlier);
  const size = s.size ?? 16;
  const data = Array.from({ length: s.batch * size }, (_, i) => i % 7);
  const t0 = performance.now();
  const { status, json } = await httpJson(eng.httpPort, 'POST', `/v2/models/${model}/infer`, {
    inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [s.batch, size], data }],
  });
  const ms = performance.now() - t0;
  expect(status, JSON.stringify(json)).toBe(200);
  expect(json.outputs[0].shape).toEqual([s.batch, size]);
  expect(json.outputs[0].data).toEqual(data.map((v) => v * 2 + 1));
  return ms;
}

describe('L0_batcher delayed-scheduler cases (TRITONSERVER_DELAY_SCHEDULER)', () => {
  it.concurrent.for(cases)('%s (%s)', async ([test, type, c], { expect }) => {
    const model = modelName(test, type);
    await loaded.get(model);
    const earlier = (s: Send) => c.sends.filter((o) => (o.at ?? 0) < (s.at ?? 0)).length;
    const latencies = await Promise.all(c.sends.map((s) => send(expect, model, s, earlier(s))));
    c.sends.forEach((s, i) => {
      expect(latencies[i], `request ${i} latency`).toBeLessThanOrEqual(s.max);
      if (s.min !== undefined) expect(latencies[i], `request ${i} latency`).toBeGreaterThanOrEqual(s.min * 0.98);
    });
    const st = (await httpJson(eng.httpPort, 'GET', `/v2/models/${model}/stats`)).json.model_stats[0];
    const batches = Object.fromEntries(
      st.batch_stats.map((b: { batch_size: number; compute_infer: { count: number } }) => [b.batch_size, Number(b.compute_infer.count)]),
    );
    expect({ batches, requests: Number(st.inference_stats.success.count), inferences: Number(st.inference_count) }).toEqual({
      batches: c.batches,
      requests: c.requests,
      inferences: c.inferences,
    });
    await eng.server.unloadModel(model);
  });
});
