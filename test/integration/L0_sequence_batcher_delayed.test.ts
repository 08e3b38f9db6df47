// Triton's L0_sequence_batcher cases that hold the sequence batcher with
// TRITONSERVER_DELAY_SCHEDULER until every request is queued (half, skip and
// full batch), with IMPLICIT_STATE, on Triton's `models1` layout (one
// instance, max_batch_size 4, direct strategy): each sequence's requests are
// sent back to back without waiting, later sequences after a pause, and the
// batches that come out (batch size -> executions), the execution and
// inference counts and each sequence's last sum are Triton's. Each case loads
// its own copy of an ONNX accumulator with the hook set to its count.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { writeAccumulator } from '../fixtures/test-models.ts';
import { f32Bytes, httpJson, protoLoaderClient, removeDir, startTestEngine, tempRepo, toF32, type ProtoClient } from './helpers.ts';

interface Sequence {
  id: number;
  values: number[];
  /** ms after the case starts (Triton's 3 s pause, scaled down). */
  at?: number;
}
interface Case {
  hold: number;
  sequences: Sequence[];
  batches: Record<number, number>;
  executions: number;
  inferences: number;
}
const CASES: Record<string, Case> = {
  test_half_batch: {
    hold: 8,
    sequences: [
      { id: 987, values: [1, 2, 3, 4] },
      { id: 988, values: [0, 9, 5, 13] },
    ],
    batches: { 2: 4 },
    executions: 4,
    inferences: 8,
  },
  test_skip_batch: {
    hold: 12,
    sequences: [
      { id: 1002, values: [11, 12, 13, 14] },
      { id: 1004, values: [1111, 1112, 1113, 1114] },
      { id: 1001, values: [1, 3], at: 300 },
      { id: 1003, values: [111, 113], at: 300 },
    ],
    batches: { 2: 2, 4: 2 },
    executions: 4,
    inferences: 12,
  },
  test_full_batch: {
    hold: 12,
    sequences: [
      { id: 1001, values: [1, 2, 3] },
      { id: 1002, values: [11, 12, 13] },
      { id: 1003, values: [111, 112, 113] },
      { id: 1004, values: [1111, 1112, 1113] },
    ],
    batches: { 4: 3 },
    executions: 3,
    inferences: 12,
  },
};
const modelOf = (test: string) => `seq_${test.replace(/^test_/, '')}`;

let repo: string;
let eng: RunningEngine;
let client: ProtoClient;
beforeAll(async () => {
  repo = tempRepo('l0-seq-delayed');
  for (const test of Object.keys(CASES)) writeAccumulator(repo, modelOf(test), 'onnx', 'direct { }');
  eng = await startTestEngine({ modelRepository: repo, controlMode: 'explicit' });
  client = protoLoaderClient(eng.grpcPort);
}, 60_000);
afterAll(async () => {
  delete process.env.TRITONSERVER_DELAY_SCHEDULER;
  client?.close();
  await eng?.stop();
  if (repo) removeDir(repo);
});

/** Send a sequence's requests back to back (in order, none awaited before the next is sent); its sums. */
async function sequence(model: string, s: Sequence): Promise<number[]> {
  await new Promise((r) => setTimeout(r, s.at ?? 0));
  const calls = s.values.map((v, k) =>
    client.call('ModelInfer', {
      model_name: model,
      inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 1] }],
      raw_input_contents: [f32Bytes([v])],
      parameters: {
        sequence_id: { int64_param: s.id },
        sequence_start: { bool_param: k === 0 },
        sequence_end: { bool_param: k === s.values.length - 1 },
      },
    }),
  );
  return (await Promise.all(calls)).map((r) => toF32(r.raw_output_contents[0])[0]!);
}

describe('L0_sequence_batcher delayed cases (TRITONSERVER_DELAY_SCHEDULER, IMPLICIT_STATE, one instance of batch 4)', () => {
  it.each(Object.keys(CASES))('%s', async (test) => {
    const c = CASES[test]!;
    const model = modelOf(test);
    process.env.TRITONSERVER_DELAY_SCHEDULER = String(c.hold);
    try {
      await eng.server.loadModel(model);
    } finally {
      delete process.env.TRITONSERVER_DELAY_SCHEDULER;
    }
    const sums = await Promise.all(c.sequences.map((s) => sequence(model, s)));
    c.sequences.forEach((s, i) => {
      const running = s.values.map((_, k) => s.values.slice(0, k + 1).reduce((a, b) => a + b, 0));
      expect(sums[i], `sequence ${s.id}`).toEqual(running);
    });
    const st = (await httpJson(eng.httpPort, 'GET', `/v2/models/${model}/stats`)).json.model_stats[0];
    const batches = Object.fromEntries(
      st.batch_stats.map((b: { batch_size: number; compute_infer: { count: number } }) => [b.batch_size, Number(b.compute_infer.count)]),
    );
    expect({ batches, executions: Number(st.execution_count), inferences: Number(st.inference_count) }).toEqual({
      batches: c.batches,
      executions: c.executions,
      inferences: c.inferences,
    });
    await eng.server.unloadModel(model);
  });
});
