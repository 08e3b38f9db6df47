// Triton's L0_sequence_batcher cases that hold the sequence batcher with
// TRITONSERVER_DELAY_SCHEDULER and TRITONSERVER_BACKLOG_DELAY_SCHEDULER (the
// six backlog cases) and test_ragged_batch, on Triton's `models1` layout (one
// instance, max_batch_size 4, direct strategy): each sequence's requests are
// sent without waiting for answers, later sequences after a pause (Triton's
// 2-3 s scaled to 200-300 ms), and each case checks every answer, the
// batches that come out (batch size -> executions; idle slots below the
// highest busy one are padded with null requests, as Triton does), the
// execution and the inference counts, as Triton's test expects. Each case
// has its own model, loaded with the hooks set to Triton's counts for it (the
// hooks are read at load, from the environment, so the loads go one at a
// time); the cases run at the same time, each once its model is in.
import { afterAll, beforeAll, describe, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { writeAccumulator, writeModel } from '../fixtures/test-models.ts';
import { batchStats, runningSums, runSequence, steps, type SequenceRun } from '../fixtures/sequence-driver.ts';
import { protoLoaderClient, removeDir, startTestEngine, tempRepo, type ProtoClient } from './helpers.ts';

const G = 200;
const IDLE_MS = 1000;
const START_ERROR = (model: string) =>
  `inference request for sequence 1001 to model '${model}' must specify the START flag on the first request of the sequence`;

interface Case {
  delay: number;
  backlogDelay: number;
  sequences: SequenceRun[];
  /** Expected answers by sequence (running sums unless given). */
  answers?: Record<number, Array<number | ((model: string) => string)>>;
  stats?: { batches: Record<number, number>; executions: number; inferences: number };
  ragged?: boolean;
}
const seq = (id: number, values: Array<number | number[]>, at = 0, end = true): SequenceRun => ({ id, steps: steps(values, { end }), at });
const CASES: Record<string, Case> = {
  test_backlog_fill: {
    delay: 10,
    backlogDelay: 2,
    sequences: [seq(1001, [1, 2, 3]), seq(1002, [11, 13]), seq(1003, [111, 113]), seq(1004, [1111, 1112, 1113])].concat(
      seq(1005, [11111], 1.5 * G),
      seq(1006, [22222], 1.5 * G),
    ),
    stats: { batches: { 4: 3 }, executions: 3, inferences: 12 },
  },
  test_backlog_fill_no_end: {
    delay: 10,
    backlogDelay: 3,
    sequences: [
      seq(1001, [1, 2, 3]),
      seq(1002, [11, 13], G),
      seq(1003, [111, 113], 2 * G),
      seq(1004, [1111, 1112, 1113], 3 * G),
      seq(1005, [11111], 4 * G),
      { id: 1006, at: 5 * G, steps: [{ value: 22222, start: true }, { value: 22223 }, { value: 22224, end: true, pause: 2 * G }] },
    ],
    // Three full batches, then 1006 (in 1003's old slot 2) alone twice, padded to 3.
    stats: { batches: { 4: 3, 3: 2 }, executions: 5, inferences: 14 },
  },
  test_backlog_same_correlation_id: {
    delay: 12,
    backlogDelay: 2,
    sequences: [
      seq(1001, [1, 2, 3]),
      seq(1002, [11, 12, 13]),
      seq(1003, [111, 112, 113]),
      seq(1004, [1111, 1112, 1113]),
      seq(1002, [11111, 11113], 1.5 * G),
    ],
    stats: { batches: { 4: 3, 1: 2 }, executions: 5, inferences: 14 },
  },
  test_backlog_same_correlation_id_no_end: {
    delay: 16,
    backlogDelay: 0,
    sequences: [
      seq(1001, [1, 3], 0, false),
      seq(1002, [11, 12, 12, 13]),
      seq(1003, [111, 112, 112, 113]),
      seq(1004, [1111, 1112, 1112, 1113]),
      seq(1001, [11111, 11113], G),
    ],
    stats: { batches: { 4: 4 }, executions: 4, inferences: 16 },
  },
  test_backlog_sequence_timeout: {
    delay: 4,
    backlogDelay: 0,
    sequences: [
      {
        id: 1001,
        steps: [
          { value: 1, start: true },
          { value: 3, pause: IDLE_MS + G },
        ],
      },
      ...[1002, 1003, 1004].map((id, k) => {
        const b = [11, 111, 1111][k]!;
        const p = IDLE_MS / 2;
        return {
          id,
          steps: [
            { value: b, start: true },
            { value: b + 1, pause: p },
            { value: b + 1, pause: p },
            { value: b + 2, end: true, pause: p },
          ],
        };
      }),
      seq(1005, [11111, 11113], 2 * G),
    ],
    // 1001 idles out, 1005 leaves the backlog for its slot, 1001's late request is a new sequence without START.
    answers: { 1001: [1, START_ERROR], 1002: [11, 23, 35, 48], 1003: [111, 223, 335, 448], 1004: [1111, 2223, 3335, 4448] },
  },
  test_backlog: {
    delay: 12,
    backlogDelay: 0,
    sequences: [1, 11, 111, 1111, 11111].map((b, k) => seq(1001 + k, [b, b + 1, b + 2])),
    stats: { batches: { 4: 3, 1: 3 }, executions: 6, inferences: 15 },
  },
  test_ragged_batch: {
    delay: 12,
    backlogDelay: 0,
    ragged: true,
    sequences: [
      seq(1001, [
        [1, 1],
        [2, 2],
        [3, 3],
      ]),
      seq(1002, [
        [11, 11],
        [12, 12],
        [13, 13],
      ]),
      seq(1003, [[111], [112], [113]]),
      seq(
        1004,
        [
          [1111, 1111, 1111],
          [1112, 1112, 1112],
          [1113, 1113, 1113],
        ],
        1.5 * G,
      ),
    ],
    // INPUT allows no ragged batch: shapes [2], [1] and [3] never share a batch; each batch is padded to 4 wide.
    stats: { batches: { 4: 9 }, executions: 9, inferences: 12 },
  },
};
const modelOf = (test: string) => `seq_${test.replace(/^test_/, '')}`;

/** A variable-size accumulator: OUTPUT = sum(INPUT) + STATE_IN (Triton's variable-size sequence models). */
const RAGGED_MODEL = `type T = { data: Uint8Array };
const f32 = (t: T) => new Float32Array(Uint8Array.from(t.data).buffer);
export function execute(requests: Array<{ inputs: Record<string, T> }>) {
  return requests.map((r) => {
    const out = new Float32Array([f32(r.inputs.INPUT).reduce((a, b) => a + b, 0) + f32(r.inputs.STATE_IN)[0]]);
    return { outputs: { OUTPUT: { datatype: 'FP32', shape: [1, 1], data: out }, STATE_OUT: { datatype: 'FP32', shape: [1, 1], data: out } } };
  });
}
`;
const raggedConfig = (name: string) => `name: "${name}"
backend: "js"
default_model_filename: "model.ts"
max_batch_size: 4
input [ { name: "INPUT", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "OUTPUT", data_type: TYPE_FP32, dims: [ 1 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
sequence_batching {
  direct { }
  control_input [ { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY fp32_false_true: [ 0, 1 ] } ] } ]
  state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
}
`;

let repo: string;
let eng: RunningEngine;
let client: ProtoClient;
/** Each case's model, loaded with the case's hook counts. */
const loaded = new Map<string, Promise<void>>();
beforeAll(async () => {
  repo = tempRepo('l0-seq-backlog');
  for (const [test, c] of Object.entries(CASES)) {
    const name = modelOf(test);
    if (c.ragged) writeModel(repo, name, raggedConfig(name), { 'model.ts': RAGGED_MODEL });
    else writeAccumulator(repo, name, 'onnx', 'direct { }', `max_sequence_idle_microseconds: ${IDLE_MS * 1000}`);
  }
  eng = await startTestEngine({ modelRepository: repo, controlMode: 'explicit' });
  client = protoLoaderClient(eng.grpcPort);
  await client.call('ServerLive', {}); // connected before the first case's timed sends
  let chain = Promise.resolve();
  for (const [test, c] of Object.entries(CASES)) {
    chain = chain.then(async () => {
      process.env.TRITONSERVER_DELAY_SCHEDULER = String(c.delay);
      process.env.TRITONSERVER_BACKLOG_DELAY_SCHEDULER = String(c.backlogDelay);
      try {
        await eng.server.loadModel(modelOf(test));
      } finally {
        delete process.env.TRITONSERVER_DELAY_SCHEDULER;
        delete process.env.TRITONSERVER_BACKLOG_DELAY_SCHEDULER;
      }
    });
    chain.catch(() => undefined); // a failed load fails its own case (and the ones after it), awaited there
    loaded.set(modelOf(test), chain);
  }
}, 60_000);
afterAll(async () => {
  await Promise.allSettled(loaded.values());
  delete process.env.TRITONSERVER_DELAY_SCHEDULER;
  delete process.env.TRITONSERVER_BACKLOG_DELAY_SCHEDULER;
  client?.close();
  await eng?.stop();
  if (repo) removeDir(repo);
});

describe('L0_sequence_batcher backlog and ragged cases (TRITONSERVER_DELAY_SCHEDULER, TRITONSERVER_BACKLOG_DELAY_SCHEDULER, one instance of batch 4)', () => {
  it.concurrent.for(Object.keys(CASES))('%s', async (test, { expect }) => {
    const c = CASES[test]!;
    const model = modelOf(test);
    await loaded.get(model);
    const outcomes = await Promise.all(c.sequences.map((s) => runSequence(client, model, s)));
    c.sequences.forEach((s, i) => {
      const want = (c.answers?.[s.id] ?? runningSums(s.steps.map((x) => x.value))).map((a) => (typeof a === 'function' ? a(model) : a));
      const got = outcomes[i]!.answers.map((a, k) =>
        typeof a === 'string' && typeof want[k] === 'string' ? a.slice(0, want[k].length) : a,
      );
      expect(got, `sequence ${s.id} (#${i})`).toEqual(want);
    });
    if (c.stats) expect(await batchStats(eng.httpPort, model)).toEqual(c.stats);
    await eng.server.unloadModel(model);
  });
});
