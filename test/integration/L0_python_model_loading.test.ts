// pb_utils.load_model / unload_model / is_model_ready (Triton's
// L0_backend_python/bls bls_model_loading): a python model, loaded in
// explicit mode, runs the three cases of Triton's test in its initialize (as
// Triton's does) against an ONNX int32 add/sub model with versions 2 and 3:
// load then unload; a config override (a malformed one refused, the model
// unchanged; a good one choosing version 2); file overrides (refused
// without a config; under another name; under the model's own name). The
// model (ours) answers the checks that failed; an empty list is a pass.
// Triton's rerun with a `model_warmup` added to the config: the load (whose
// warm-up runs execute after the initialize that loads and unloads another
// model) answers 200.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildSimple, SIMPLE_CONFIG, writeModel } from '../fixtures/test-models.ts';
import { httpJson } from './helpers.ts';
import { pythonEngine, pythonRepo } from './python-support.ts';
import type { RunningEngine } from '../../engine/server/server.ts';

const TARGET = 'onnx_int32_int32_int32';
const MODEL = `import os
import numpy as np
import triton_python_backend_utils as pb_utils

M = "${TARGET}"


class TritonPythonModel:
    def initialize(self, args):
        self.onnx = os.path.join(os.path.dirname(args["model_repository"]), M, "3", "model.onnx")
        self.failed = []
        self.ran = 0
        for case in (self.load_unload, self.config_override, self.file_override):
            self.ran += 1
            try:
                case()
            except Exception as e:
                self.failed.append(f"{case.__name__}: {type(e).__name__}: {e}")
            finally:
                pb_utils.unload_model(M)

    def check(self, what, ok):
        if not ok:
            raise AssertionError(what)

    def refused(self, what, f):
        try:
            f()
        except (pb_utils.TritonModelException, UnicodeDecodeError):
            return
        raise AssertionError(what + " was not refused")

    def load_unload(self):
        self.check("not ready before the load", not pb_utils.is_model_ready(M))
        pb_utils.load_model(model_name=M)
        self.check("ready after the load", pb_utils.is_model_ready(M))
        pb_utils.unload_model(M)
        self.check("not ready after the unload", not pb_utils.is_model_ready(M))

    def config_override(self):
        pb_utils.load_model(M)
        wrong = '"parameters": {"config": {{"backend":"onnxruntime", "version_policy":{"specific":{"versions":[2]}}}}}'
        self.refused("a malformed config", lambda: pb_utils.load_model(model_name=M, config=wrong))
        for v in ("2", "3"):
            self.check(f"version {v} still ready after the failed load", pb_utils.is_model_ready(M, v))
        pb_utils.load_model(M, config='{"backend":"onnxruntime", "version_policy":{"specific":{"versions":[2]}}}')
        self.check("version 2 ready", pb_utils.is_model_ready(M, "2"))
        self.check("version 3 gone", not pb_utils.is_model_ready(M, "3"))

    def file_override(self):
        pb_utils.load_model(M)
        with open(self.onnx, "rb") as f:
            files = {"file:1/model.onnx": f.read()}
        config = '{"backend":"onnxruntime"}'
        self.refused("files without a config", lambda: pb_utils.load_model(M, "", files))
        pb_utils.load_model(model_name="override_model", config=config, files=files)
        self.check("original version 1 not ready", not pb_utils.is_model_ready(M, "1"))
        self.check("original version 3 ready", pb_utils.is_model_ready(M, "3"))
        self.check("override version 1 ready", pb_utils.is_model_ready("override_model", "1"))
        self.check("override version 3 not ready", not pb_utils.is_model_ready("override_model", "3"))
        pb_utils.load_model(M, config, files)
        self.check("original now version 1", pb_utils.is_model_ready(M, "1"))
        self.check("original version 3 gone", not pb_utils.is_model_ready(M, "3"))
        self.check("override still version 1", pb_utils.is_model_ready("override_model", "1"))
        pb_utils.unload_model("override_model")

    def execute(self, requests):
        out = np.array(self.failed or [""], dtype=np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("FAILED", out), pb_utils.Tensor("RAN", np.array([self.ran], dtype=np.int32))])
                for _ in requests]
`;
const CONFIG = `name: "bls_model_loading"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 1 ] } ]
output [ { name: "FAILED", data_type: TYPE_STRING, dims: [ -1 ] }, { name: "RAN", data_type: TYPE_INT32, dims: [ 1 ] } ]
`;

const WARMUP_CONFIG = `${CONFIG.replace('"bls_model_loading"', '"bls_model_loading_warmup"')}model_warmup [ {
  name: "regular sample"
  batch_size: 1
  inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 1 ] random_data: true } }
} ]
`;

let eng: RunningEngine;
pythonEngine(
  () => {
    const repo = pythonRepo('l0-py-model-loading', [], {
      bls_model_loading: { config: CONFIG, model: MODEL },
      bls_model_loading_warmup: { config: WARMUP_CONFIG, model: MODEL },
    });
    const config = SIMPLE_CONFIG.replace('name: "simple"', `name: "${TARGET}"`) + 'version_policy: { all { } }\n';
    writeModel(repo, TARGET, config, {});
    rmSync(path.join(repo, TARGET, '1'), { recursive: true });
    for (const v of ['2', '3']) {
      mkdirSync(path.join(repo, TARGET, v));
      writeFileSync(path.join(repo, TARGET, v, 'model.onnx'), buildSimple());
    }
    return repo;
  },
  (s) => {
    eng = s.eng;
  },
  { controlMode: 'explicit' },
);

describe("L0_python_model_loading (pb_utils.load_model, after Triton's bls_model_loading)", () => {
  it.each([
    ['loading the model runs the three cases in its initialize; every check passes', 'bls_model_loading'],
    ["Triton's rerun with model_warmup: the load answers 200, every check passes", 'bls_model_loading_warmup'],
  ])('%s', async (_, model) => {
    const load = await httpJson(eng.httpPort, 'POST', `/v2/repository/models/${model}/load`, {});
    expect([load.status, load.json]).toEqual([200, {}]);
    const { status, json } = await httpJson(eng.httpPort, 'POST', `/v2/models/${model}/infer`, {
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1], data: [1] }],
    });
    expect(status).toBe(200);
    const out = Object.fromEntries(json.outputs.map((o: { name: string; data: unknown[] }) => [o.name, o.data]));
    expect(out).toEqual({ FAILED: [''], RAN: [3] });
    const index = (await httpJson(eng.httpPort, 'POST', '/v2/repository/index', {})).json;
    expect(index.filter((m: { state: string }) => m.state === 'READY').map((m: { name: string }) => m.name)).toEqual([model]);
    expect((await httpJson(eng.httpPort, 'POST', `/v2/repository/models/${model}/unload`, {})).status).toBe(200);
  });
});
