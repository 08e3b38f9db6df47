// BLS only inside execute (Triton's L0_backend_python/bls bls_init_error and
// bls_finalize_error): a model whose initialize makes a BLS call fails to
// load with Triton's "BLS is only supported during the 'execute' function.";
// one whose finalize makes it unloads, the same text in the log; BLS from
// execute still works. Real stubs; models written for this suite.
import { describe, expect, it, vi } from 'vitest';
import { httpJson } from './helpers.ts';
import { pythonEngine, pythonRepo } from './python-support.ts';
import type { RunningEngine } from '../../engine/server/server.ts';

const TEXT = "BLS is only supported during the 'execute' function.";
const CONFIG = (name: string) => `name: "${name}"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 1 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 1 ] } ]
`;
const model = (phase: 'initialize' | 'finalize' | 'execute') => `import numpy as np
import triton_python_backend_utils as pb_utils


def call():
    req = pb_utils.InferenceRequest(model_name="identity", requested_output_names=["OUTPUT0"],
                                    inputs=[pb_utils.Tensor("INPUT0", np.array([3.5], dtype=np.float32))])
    return req.exec()


class TritonPythonModel:
    def initialize(self, args):
        if "${phase}" == "initialize":
            call()

    def execute(self, requests):
        out = []
        for r in requests:
            if "${phase}" == "execute":
                res = call()
                if res.has_error():
                    raise pb_utils.TritonModelException(res.error().message())
                out.append(pb_utils.InferenceResponse([pb_utils.get_output_tensor_by_name(res, "OUTPUT0")]))
            else:
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())]))
        return out

    def finalize(self):
        if "${phase}" == "finalize":
            call()
`;
const IDENTITY = `import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())]) for r in requests]
`;

let eng: RunningEngine;
pythonEngine(
  () =>
    pythonRepo('l0-py-bls-phases', [], {
      identity: { config: CONFIG('identity'), model: IDENTITY },
      bls_init_error: { config: CONFIG('bls_init_error'), model: model('initialize') },
      bls_finalize_error: { config: CONFIG('bls_finalize_error'), model: model('finalize') },
      bls_in_execute: { config: CONFIG('bls_in_execute'), model: model('execute') },
    }),
  (s) => {
    eng = s.eng;
  },
  { controlMode: 'explicit', loadModels: ['identity', 'bls_finalize_error', 'bls_in_execute'] },
);

const infer = (m: string) =>
  httpJson(eng.httpPort, 'POST', `/v2/models/${m}/infer`, { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1], data: [1] }] });

describe('L0_python_bls_phases (Triton L0_backend_python/bls init and finalize errors)', () => {
  it("a BLS call in initialize fails the load with Triton's text", async () => {
    const { status, json } = await httpJson(eng.httpPort, 'POST', '/v2/repository/models/bls_init_error/load', {});
    expect(status).not.toBe(200);
    expect(json.error).toContain(TEXT);
  });

  it('a BLS call in execute runs', async () => {
    const { status, json } = await infer('bls_in_execute');
    expect([status, json.outputs?.[0]?.data]).toEqual([200, [3.5]]);
  });

  it('a BLS call in finalize is refused with the same text, logged; the unload completes', async () => {
    expect((await infer('bls_finalize_error')).status).toBe(200);
    const lines: string[] = [];
    const capture = (chunk: string | Uint8Array) => {
      lines.push(String(chunk));
      return true;
    };
    const spies = [
      vi.spyOn(process.stderr, 'write').mockImplementation(capture),
      vi.spyOn(process.stdout, 'write').mockImplementation(capture),
    ];
    try {
      await eng.server.unloadModel('bls_finalize_error');
      for (const until = Date.now() + 5000; !lines.some((l) => l.includes(TEXT)) && Date.now() < until; ) {
        await new Promise((r) => setTimeout(r, 20));
      }
    } finally {
      for (const s of spies) s.mockRestore();
    }
    expect(
      lines.some(
        (l) =>
          /^E\S+ python 'bls_finalize_error' \S+: finalize failed: TritonModelException: BLS is only supported/.test(l) && l.includes(TEXT),
      ),
    ).toBe(true);
    const { json } = await httpJson(eng.httpPort, 'POST', '/v2/repository/index', {});
    expect(json.find((m: { name: string }) => m.name === 'bls_finalize_error').state).toBe('UNAVAILABLE');
  });
});
