// The per-model stub memory limit (issue 41, engine/backends/python/stub-memory-limit.ts)
// on real stub processes: a model whose execute() allocates and touches
// 600 MB under `stub_memory_limit` 256MiB fails that request with an error
// naming the model, the limit and the usage; its stub is killed and started
// again, and the next request works. Without the limit (before it existed)
// the same request succeeded with the stub holding the 600 MB.
import { describe, expect, it } from 'vitest';
import { httpJson } from './helpers.ts';
import { pythonRepo, pythonEngine } from './python-support.ts';
import type { RunningEngine } from '../../engine/server/server.ts';
import type { PythonInstance } from '../../engine/backends/python/python-instance.ts';

/** X == 1: allocate and touch 600 MB (kept until the next call); otherwise Y = X. */
const hog = (name: string, params: string) => ({
  config: `name: "${name}"
backend: "python"
input [ { name: "X", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "Y", data_type: TYPE_INT32, dims: [ 1 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
${params}`,
  model: `import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        x = int(pb_utils.get_input_tensor_by_name(requests[0], "X").as_numpy()[0])
        if x == 1:
            self.held = np.ones(600 * 1000 * 1000, dtype=np.uint8)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.array([x], dtype=np.int32))]) for _ in requests]
`,
});

let eng: RunningEngine;
pythonEngine(
  () =>
    pythonRepo('l0-py-mem', [], {
      hog_limited: hog('hog_limited', 'parameters { key: "stub_memory_limit" value: { string_value: "256MiB" } }'),
      hog_bad: hog('hog_bad', 'parameters { key: "stub_memory_limit" value: { string_value: "lots" } }'),
    }),
  (s) => ({ eng } = s),
  { controlMode: 'explicit', loadModels: ['hog_limited'] },
);

const infer = (model: string, x: number) =>
  httpJson(eng.httpPort, 'POST', `/v2/models/${model}/infer`, { inputs: [{ name: 'X', datatype: 'INT32', shape: [1], data: [x] }] });
const stubPid = (model: string) =>
  (eng.engine.repository.readyVersion(model)?.backend.instances[0] as unknown as PythonInstance | undefined)?.pid;

describe('python stub memory limit (stub_memory_limit)', () => {
  it('a stub past its limit fails the request naming model, limit and usage; the next request works on a new stub', async () => {
    expect((await infer('hog_limited', 5)).status).toBe(200);
    const before = stubPid('hog_limited');
    const r = await infer('hog_limited', 1);
    expect(r.status).toBe(503);
    const msg = String((r.json as { error: string }).error);
    expect(msg).toMatch(
      /python model 'hog_limited' instance hog_limited_0_0: its stub used [\d.]+ MiB, over its stub_memory_limit of 256(\.0+)? MiB/,
    );
    // Shown with as many decimals as set it apart from the limit (unit/stub-memory-limit: mibApart).
    const used = Number(/used ([\d.]+) MiB/.exec(msg)![1]);
    expect(used).toBeGreaterThan(256);
    const next = await infer('hog_limited', 7);
    expect(next.status).toBe(200);
    expect((next.json as { outputs: Array<{ data: number[] }> }).outputs[0]!.data).toEqual([7]);
    expect(stubPid('hog_limited')).not.toBe(before);
  }, 60_000);

  it('a malformed limit fails the load naming the parameter', async () => {
    const r = await httpJson(eng.httpPort, 'POST', '/v2/repository/models/hog_bad/load', {});
    expect(r.status).toBe(400);
    expect(String((r.json as { error: string }).error)).toMatch(
      /parameter stub_memory_limit must be a size of at least 16MiB .* got 'lots'/,
    );
  });
});
