// Triton's L0_sequence_batcher QUEUE_DELAY_TESTS: the direct strategy with
// max_queue_delay_microseconds and minimum_slot_utilization 0, 0.5 and 1, on
// its queue_delay_models layout (one instance, max_batch_size 4) with
// TRITONSERVER_DELAY_SCHEDULER=2. Sequence 1001 sends one START request,
// sequence 1002 two requests a moment later; the batches are {2: 2} (the
// second one "null, seq 2": slot 0 is padded) and each sequence's latency
// falls in Triton's window. Triton's 3 s delay, 1 s sleep and 2 s pause are
// scaled by 1/3, its latency windows with them; a lower bound says the batch
// waited, an upper bound that it did not wait longer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { writeAccumulator } from '../fixtures/test-models.ts';
import { batchStats, runSequence } from '../fixtures/sequence-driver.ts';
import { protoLoaderClient, removeDir, startTestEngine, tempRepo, type ProtoClient } from './helpers.ts';

const S = 1000 / 3; // one of Triton's seconds, in ms
/** [lower, upper] ms; undefined: no bound (Triton's None). */
type Window = [number | undefined, number | undefined];
interface Case {
  minUtil: number;
  /** Triton's (max, min) latency thresholds of sequences 1001 and 1002, as [min, max]. */
  windows: [Window, Window];
  /** Pause before 1002's second request (Triton's pre_delay_ms). */
  pause?: number;
}
const CASES: Record<string, Case> = {
  // Never waits: both batches at once.
  test_queue_delay_no_min_util: {
    minUtil: 0,
    windows: [
      [undefined, 2 * S],
      [undefined, 2 * S],
    ],
  },
  // 2 of 4 slots reach 0.5 at once; "null, seq 2" (1 of 4) waits the delay.
  test_queue_delay_half_min_util: {
    minUtil: 0.5,
    windows: [
      [undefined, 2 * S],
      [3 * S, 4 * S],
    ],
  },
  // Both batches wait the delay.
  test_queue_delay_full_min_util: {
    minUtil: 1,
    windows: [
      [3 * S, 4 * S],
      [5 * S, 6 * S],
    ],
    pause: 2 * S,
  },
};
const modelOf = (test: string) => `seq_${test.replace(/^test_/, '')}`;

let repo: string;
let eng: RunningEngine;
let client: ProtoClient;
beforeAll(async () => {
  repo = tempRepo('l0-seq-queue-delay');
  for (const [test, c] of Object.entries(CASES)) {
    writeAccumulator(
      repo,
      modelOf(test),
      'onnx',
      `direct { max_queue_delay_microseconds: ${Math.round(3 * S * 1000)} minimum_slot_utilization: ${c.minUtil} }`,
    );
  }
  eng = await startTestEngine({ modelRepository: repo, controlMode: 'explicit' });
  client = protoLoaderClient(eng.grpcPort);
}, 60_000);
afterAll(async () => {
  delete process.env.TRITONSERVER_DELAY_SCHEDULER;
  client?.close();
  await eng?.stop();
  if (repo) removeDir(repo);
});

describe('L0_sequence_batcher queue delay cases (direct max_queue_delay_microseconds, minimum_slot_utilization, TRITONSERVER_DELAY_SCHEDULER=2)', () => {
  it.each(Object.keys(CASES))('%s', async (test) => {
    const c = CASES[test]!;
    const model = modelOf(test);
    process.env.TRITONSERVER_DELAY_SCHEDULER = '2';
    try {
      await eng.server.loadModel(model);
    } finally {
      delete process.env.TRITONSERVER_DELAY_SCHEDULER;
    }
    const [a, b] = await Promise.all([
      runSequence(client, model, { id: 1001, steps: [{ value: 1, start: true }] }),
      runSequence(client, model, {
        id: 1002,
        at: S,
        steps: [
          { value: 11, start: true },
          { value: 12, pause: c.pause },
        ],
      }),
    ]);
    expect([a.answers, b.answers]).toEqual([[1], [11, 23]]);
    [a, b].forEach((o, i) => {
      const [lo, hi] = c.windows[i]!;
      if (lo !== undefined) expect(o.latencyMs, `sequence ${1001 + i} waited`).toBeGreaterThanOrEqual(lo - 5);
      if (hi !== undefined) expect(o.latencyMs, `sequence ${1001 + i} not longer`).toBeLessThan(hi);
    });
    expect(await batchStats(eng.httpPort, model)).toEqual({ batches: { 2: 2 }, executions: 2, inferences: 3 });
    await eng.server.unloadModel(model);
  });
});
