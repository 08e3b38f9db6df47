// Implicit state's initial value from a file (Triton's sequence_batching
// state { initial_state { data_file } }, read from the model's initial_state/
// folder), on the real engine with the JS accumulator (OUTPUT = INPUT +
// STATE_IN): the first request of each sequence sees the file's value, the
// next ones the state carried; a file of the wrong size or one that is not
// there fails the load naming it; a path out of the folder is refused.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { RunningEngine } from '../../engine/server/server.ts';
import { JS_ACCUMULATOR_MODEL, jsAccumulatorConfig, writeModel } from '../fixtures/test-models.ts';
import { httpJson, removeDir, startTestEngine } from './helpers.ts';

const STATE = 'state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]';
const withInitial = (name: string, dataFile: string) =>
  jsAccumulatorConfig(name, 'direct { }').replace(
    STATE,
    `state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 1 ] initial_state [ { data_type: TYPE_FP32 dims: [ 1 ] name: "init" data_file: "${dataFile}" } ] } ]`,
  );

let repo: string;
let eng: RunningEngine;

function model(name: string, dataFile: string, bytes?: Uint8Array): void {
  writeModel(repo, name, withInitial(name, dataFile), { 'model.ts': JS_ACCUMULATOR_MODEL });
  if (bytes) {
    mkdirSync(path.join(repo, name, 'initial_state'), { recursive: true });
    writeFileSync(path.join(repo, name, 'initial_state', dataFile), bytes);
  }
}

beforeAll(async () => {
  repo = mkdtempSync(path.join(os.tmpdir(), 'l0-seq-init-'));
  expect(jsAccumulatorConfig('x', 'direct { }')).toContain(STATE);
  model('from_file', 'ten.bin', new Uint8Array(new Float32Array([10]).buffer));
  model('wrong_size', 'two.bin', new Uint8Array(new Float32Array([1, 2]).buffer));
  model('missing_file', 'nothing.bin');
  model('escapes', '../config.pbtxt');
  eng = await startTestEngine({ modelRepository: repo });
}, 60_000);
afterAll(async () => {
  await eng?.stop();
  removeDir(repo);
});

const step = async (id: number, value: number, start = false) => {
  const r = await httpJson(eng.httpPort, 'POST', '/v2/models/from_file/infer', {
    parameters: { sequence_id: id, sequence_start: start },
    inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 1], data: [value] }],
    outputs: [{ name: 'OUTPUT' }],
  });
  expect(r.status).toBe(200);
  return (r.json.outputs as Array<{ data: number[] }>)[0]!.data[0];
};
const reason = async (name: string) => {
  const index = (await httpJson(eng.httpPort, 'POST', '/v2/repository/index', {})).json as unknown as Array<{
    name: string;
    state: string;
    reason: string;
  }>;
  return index.find((m) => m.name === name)!;
};

describe('L0_sequence_initial_state', () => {
  it("the first request of each sequence starts from the file's value, the next from the state carried", async () => {
    expect(await step(7, 1, true)).toBe(11);
    expect(await step(7, 2)).toBe(13);
    expect(await step(8, 5, true)).toBe(15);
    expect(await step(7, 3)).toBe(16);
    expect(await step(7, 1, true)).toBe(11); // a new start resets to the file's value
  });

  it('a file of the wrong size, a missing file and a path out of the folder fail the load, named', async () => {
    const wrong = await reason('wrong_size');
    expect(wrong.state).toBe('UNAVAILABLE');
    expect(wrong.reason).toContain(
      "sequence_batching.state[0].initial_state[0].data_file: 'initial_state/two.bin' holds 8 bytes; state 'STATE_IN' (TYPE_FP32 [1]) needs 4",
    );
    expect((await reason('missing_file')).reason).toContain(
      "sequence_batching.state[0].initial_state[0].data_file: cannot read 'initial_state/nothing.bin'",
    );
    expect((await reason('escapes')).reason).toContain("'../config.pbtxt' must be a path inside the model's initial_state/ folder");
  });
});
