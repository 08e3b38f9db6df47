// Triton's L0_sequence_batcher with IMPLICIT_STATE=1: the cases of
// sequence_batcher_test.py that need no delayed scheduler, on accumulators
// whose running sum lives in implicit state (the engine carries STATE_OUT to
// STATE_IN): ONNX, JS, and JS with INITIAL_STATE_FILE (an initial_state
// data_file of 100, so every answer is 100 more, as Triton's variant
// expects); over HTTP then gRPC as Triton's _protocols do.
// Each case's correlation IDs, values and flags, its expected last answer and
// errors, and its statistics (every execution of batch size 1) are Triton's.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { JS_ACCUMULATOR_MODEL, jsAccumulatorConfig, writeAccumulator, writeModel } from '../fixtures/test-models.ts';
import {
  f32Bytes,
  grpcError,
  httpJson,
  protoLoaderClient,
  removeDir,
  startTestEngine,
  tempRepo,
  toF32,
  type ProtoClient,
} from './helpers.ts';

type Flag = 'start' | 'end' | 'start,end' | null;
type Step = [Flag, number];
interface Case {
  id: number;
  steps: Step[];
  /** The last answer, or the error (its start) the sequence ends with. */
  last?: number;
  error?: string;
  batchSize?: number;
  /** Successful executions per protocol run (Triton's check_status), when Triton checks them. */
  execs?: number;
}
const msg = {
  start: (id: number, m: string) =>
    `inference request for sequence ${id} to model '${m}' must specify the START flag on the first request of the sequence`,
  id: (m: string) => `inference request to model '${m}' must specify a non-zero or non-empty correlation ID`,
  batch: (m: string) => `inference request to model '${m}' must specify batch-size 1 due to requirements of sequence batcher`,
};
const CASES: Record<string, (m: string) => Case> = {
  test_simple_sequence: () => ({
    id: 5,
    steps: [['start', 1], ...[2, 3, 4, 5, 6, 7, 8].map((v): Step => [null, v]), ['end', 9]],
    last: 45,
    execs: 9,
  }),
  test_length1_sequence: () => ({ id: 99, steps: [['start,end', 42]], last: 42, execs: 1 }),
  test_batch_size: (m) => ({
    id: 27,
    steps: [
      ['start', 1],
      ['end', 9],
    ],
    batchSize: 2,
    error: msg.batch(m),
  }),
  test_no_correlation_id: (m) => ({
    id: 0,
    steps: [
      ['start', 1],
      ['end', 9],
    ],
    error: msg.id(m),
  }),
  test_no_sequence_start: (m) => ({
    id: 37469245,
    steps: [
      [null, 1],
      [null, 2],
      ['end', 3],
    ],
    error: msg.start(37469245, m),
  }),
  test_no_sequence_start2: (m) => ({
    id: 3,
    steps: [
      ['start', 1],
      [null, 2],
      ['end', 3],
      [null, 55],
    ],
    error: msg.start(3, m),
    execs: 3,
  }),
  test_no_sequence_end: () => ({
    id: 4566,
    steps: [
      ['start', 1],
      [null, 2],
      ['start', 42],
      ['end', 9],
    ],
    last: 51,
    execs: 4,
  }),
};
const VARIANTS = ['onnx', 'js', 'js_initial_state'] as const;
type Variant = (typeof VARIANTS)[number];
const modelOf = (test: string, v: Variant) => `${v}_${test.replace(/^test_/, '')}`;
const STATE = 'state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]';
const INITIAL =
  'state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 1 ] initial_state [ { data_type: TYPE_FP32 dims: [ 1 ] name: "init" data_file: "hundred.bin" } ] } ]';

function writeVariant(name: string, v: Variant): void {
  if (v === 'onnx') return writeAccumulator(repo, name, 'onnx', 'direct { }');
  if (v === 'js') return writeAccumulator(repo, name, 'js', 'direct { }');
  const config = jsAccumulatorConfig(name, 'direct { }');
  expect(config).toContain(STATE);
  writeModel(repo, name, config.replace(STATE, INITIAL), { 'model.ts': JS_ACCUMULATOR_MODEL });
  mkdirSync(path.join(repo, name, 'initial_state'), { recursive: true });
  writeFileSync(path.join(repo, name, 'initial_state', 'hundred.bin'), new Uint8Array(new Float32Array([100]).buffer));
}

let repo: string;
let eng: RunningEngine;
let client: ProtoClient;
beforeAll(async () => {
  repo = tempRepo('l0-seq-implicit');
  for (const test of Object.keys(CASES)) for (const v of VARIANTS) writeVariant(modelOf(test, v), v);
  eng = await startTestEngine({ modelRepository: repo });
  client = protoLoaderClient(eng.grpcPort);
}, 60_000);
afterAll(async () => {
  client?.close();
  await eng?.stop();
  if (repo) removeDir(repo);
});

/** One request of a sequence; its sum, or throws with the server's message. */
async function step(protocol: 'http' | 'grpc', model: string, id: number, [flag, v]: Step, batch: number): Promise<number> {
  const start = flag?.includes('start') ?? false;
  const end = flag?.includes('end') ?? false;
  const values = new Array<number>(batch).fill(v);
  if (protocol === 'http') {
    const { status, json } = await httpJson(eng.httpPort, 'POST', `/v2/models/${model}/infer`, {
      parameters: { sequence_id: id, sequence_start: start, sequence_end: end },
      inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [batch, 1], data: values }],
    });
    if (status !== 200) throw new Error(json.error);
    return json.outputs.find((o: { name: string }) => o.name === 'OUTPUT').data[0];
  }
  const call = client.call('ModelInfer', {
    model_name: model,
    inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [batch, 1] }],
    raw_input_contents: [f32Bytes(values)],
    parameters: { sequence_id: { int64_param: id }, sequence_start: { bool_param: start }, sequence_end: { bool_param: end } },
  });
  const r = await call.catch(async () => {
    throw new Error((await grpcError(call)).details);
  });
  const out = r.outputs.findIndex((o: { name: string }) => o.name === 'OUTPUT');
  return toF32(r.raw_output_contents[out])[0]!;
}

describe('L0_sequence_batcher, implicit state (IMPLICIT_STATE=1)', () => {
  const cases = Object.keys(CASES).flatMap((test) => VARIANTS.map((v) => [test, v] as const));
  it.each(cases)('%s (%s) over HTTP then gRPC', async (test, v) => {
    const model = modelOf(test, v);
    const c = CASES[test]!(model);
    const offset = v === 'js_initial_state' ? 100 : 0;
    for (const [idx, protocol] of (['http', 'grpc'] as const).entries()) {
      let last: number | undefined;
      let error: string | undefined;
      for (const s of c.steps) {
        try {
          last = await step(protocol, model, c.id, s, c.batchSize ?? 1);
        } catch (err) {
          error = (err as Error).message;
          break;
        }
      }
      if (c.error) expect(error, protocol).toBe(c.error);
      else expect([error, last], protocol).toEqual([undefined, c.last! + offset]);
      if (c.execs !== undefined) {
        const st = (await httpJson(eng.httpPort, 'GET', `/v2/models/${model}/stats`)).json.model_stats[0];
        const n = c.execs * (idx + 1);
        const batches = Object.fromEntries(
          st.batch_stats.map((b: { batch_size: number; compute_infer: { count: number } }) => [
            b.batch_size,
            Number(b.compute_infer.count),
          ]),
        );
        expect({ batches, execs: Number(st.execution_count), inferences: Number(st.inference_count) }, protocol).toEqual({
          batches: { 1: n },
          execs: n,
          inferences: n,
        });
      }
    }
  });
});
