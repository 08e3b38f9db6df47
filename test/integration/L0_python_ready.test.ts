// A python model's optional is_ready(), asked on every model readiness check
// (gRPC ModelReady, HTTP GET /v2/models/<m>/ready) as Triton's python backend
// does: its answer is the model's readiness; an exception, a non-bool answer
// or no answer within 5 s is "not ready"; a check made while an earlier one
// is unanswered waits on that one; it is answered while execute is busy; a
// question open when the stub dies is "not ready" at once. Real stubs; the
// test steers is_ready() through a file in the model's folder. The three
// cases that wait (a busy execute, the 5 s timeout, a killed stub) run at the
// same time, each on its own copy of the model.
import { describe, expect, it } from 'vitest';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { RunningEngine } from '../../engine/server/server.ts';
import type { PythonInstance } from '../../engine/backends/python/python-instance.ts';
import { f32Bytes, toF32, type ProtoClient } from './helpers.ts';
import { pythonRepo, pythonEngine } from './python-support.ts';

const readyProbe = (name: string) => ({
  config: `name: "${name}"
backend: "python"
max_batch_size: 0
input [ { name: "SLEEP", data_type: TYPE_FP32, dims: [ 1 ] } ]
output [ { name: "Y", data_type: TYPE_FP32, dims: [ 1 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
`,
  model: `import os
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.mode_file = os.path.join(args["model_repository"], "ready_mode")
        self.calls_file = os.path.join(args["model_repository"], "is_ready_calls")

    def is_ready(self):
        with open(self.calls_file, "a") as f:
            f.write("x")
        mode = open(self.mode_file).read().strip() if os.path.exists(self.mode_file) else "true"
        if mode == "false":
            return False
        if mode == "raise":
            raise RuntimeError("the index is still loading")
        if mode == "number":
            return 1
        if mode.startswith("sleep "):
            time.sleep(float(mode.split()[1]))
        return True

    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "SLEEP").as_numpy()
            time.sleep(float(x[0]))
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x.copy())]))
        return out
`,
});

let repo: string;
let eng: RunningEngine;
let client: ProtoClient;

/** The copies of the model: one per case that waits, beside the shared one. */
const BUSY = 'ready_probe_busy';
const DIES = 'ready_probe_dies';
const setMode = (mode: string, model = 'ready_probe') => writeFileSync(path.join(repo, model, 'ready_mode'), mode);
const calls = (model = 'ready_probe') => {
  const f = path.join(repo, model, 'is_ready_calls');
  return existsSync(f) ? readFileSync(f, 'utf8').length : 0;
};
const grpcReady = async (model = 'ready_probe') => (await client.call('ModelReady', { name: model })).ready as boolean;
const httpReady = async (model = 'ready_probe') => (await fetch(`http://127.0.0.1:${eng.httpPort}/v2/models/${model}/ready`)).status;
const infer = (seconds: number, model = 'ready_probe') =>
  client.call('ModelInfer', {
    model_name: model,
    inputs: [{ name: 'SLEEP', datatype: 'FP32', shape: [1] }],
    raw_input_contents: [f32Bytes([seconds])],
  });
/** ms a promise took, and its value. */
async function timed<T>(p: Promise<T>): Promise<[T, number]> {
  const t0 = performance.now();
  const v = await p;
  return [v, performance.now() - t0];
}

pythonEngine(
  () =>
    pythonRepo('l0-python-ready', ['add_sub'], {
      ready_probe: readyProbe('ready_probe'),
      [BUSY]: readyProbe(BUSY),
      [DIES]: readyProbe(DIES),
    }),
  (s) => ({ repo, eng, client } = s),
);

describe('L0_python_ready: is_ready() on readiness checks', () => {
  it("the model's answer is what ModelReady and GET /ready say; a model without is_ready() is ready", async () => {
    setMode('true');
    const before = calls();
    expect(await grpcReady()).toBe(true);
    expect(await httpReady()).toBe(200);
    expect(calls()).toBe(before + 2);
    setMode('false');
    expect(await grpcReady()).toBe(false);
    expect(await httpReady()).toBe(400);
    // Not ready is the model's word, not a state change: it answers again once it says so.
    setMode('true');
    expect(await grpcReady()).toBe(true);
    expect(eng.server.repositoryIndex(false).find((m) => m.name === 'ready_probe')!.state).toBe('READY');
    expect(await grpcReady('add_sub')).toBe(true);
    expect(await httpReady('add_sub')).toBe(200);
  });

  it('an exception or a non-bool answer is not ready', async () => {
    setMode('raise');
    expect(await grpcReady()).toBe(false);
    setMode('number');
    expect(await httpReady()).toBe(400);
    setMode('true');
    expect(await grpcReady()).toBe(true);
  });

  it.concurrent('is answered while execute is busy', async ({ expect }) => {
    setMode('true', BUSY);
    const busy = infer(2.5, BUSY);
    await new Promise((r) => setTimeout(r, 300));
    const [ready, ms] = await timed(grpcReady(BUSY));
    expect(ready).toBe(true);
    expect(ms).toBeLessThan(1500);
    expect(Array.from(toF32((await busy).raw_output_contents[0]))).toEqual([2.5]);
  });

  it.concurrent('no answer within 5 s is not ready; the next check waits on the same question', async ({ expect }) => {
    setMode('sleep 5.8');
    const before = calls();
    const [first, ms1] = await timed(grpcReady());
    expect(first).toBe(false);
    expect(ms1).toBeGreaterThan(4900);
    expect(ms1).toBeLessThan(5700);
    // The model is still in that is_ready(); this check gets its answer (True) at ~5.8 s.
    const [second, ms2] = await timed(grpcReady());
    expect(second).toBe(true);
    expect(ms2).toBeLessThan(2000);
    expect(calls()).toBe(before + 1);
    setMode('true');
  }, 15_000);

  it.concurrent('a question open when the stub dies is not ready at once; the restarted stub answers again', async ({ expect }) => {
    setMode('sleep 30', DIES);
    const [stub] = eng.engine.repository.readyVersion(DIES)!.backend.instances as unknown as PythonInstance[];
    const pending = timed(grpcReady(DIES));
    await new Promise((r) => setTimeout(r, 300));
    process.kill(stub!.pid!, 'SIGKILL');
    const [ready, ms] = await pending;
    expect(ready).toBe(false);
    expect(ms).toBeLessThan(2000);
    setMode('true', DIES);
    expect(Array.from(toF32((await infer(0, DIES)).raw_output_contents[0]))).toEqual([0]);
    expect(await grpcReady(DIES)).toBe(true);
  });
});
