// pb_utils refuses bad arguments as Triton's binding does, checked inside a
// real stub (after Triton's L0_backend_python/argument_validation, whose
// model runs its checks in execute): None where a list, name or number
// belongs is a TypeError, as is an unknown keyword (pybind11's answer); a
// None inside a tensor list is a TritonModelException; a log level is a
// pb_utils.LogLevel, never an int. The model (ours) answers the checks
// that failed, so an empty list is a pass; the count proves they all ran.
import { describe, expect, it } from 'vitest';
import { httpJson } from './helpers.ts';
import { pythonEngine, pythonRepo } from './python-support.ts';
import type { RunningEngine } from '../../engine/server/server.ts';

const MODEL = `import numpy as np
import triton_python_backend_utils as pb_utils

E = pb_utils.TritonModelException
T = [pb_utils.Tensor("INPUT0", np.asarray([1, 2], dtype=np.int32))]


def request(**kw):
    args = {"model_name": "m", "inputs": T, "requested_output_names": ["o"]}
    args.update(kw)
    return pb_utils.InferenceRequest(**args)


CHECKS = [
    ("request inputs [None]", E, lambda: request(inputs=[None])),
    ("request inputs None", TypeError, lambda: request(inputs=None)),
    ("request model_name None", TypeError, lambda: request(model_name=None)),
    ("request requested_output_names [None]", TypeError, lambda: request(requested_output_names=[None])),
    ("request requested_output_names None", TypeError, lambda: request(requested_output_names=None)),
    ("request unknown keyword", TypeError, lambda: request(correleation_id=None)),
    ("request request_id None", TypeError, lambda: request(request_id=None)),
    ("request model_version None", TypeError, lambda: request(model_version=None)),
    ("request flags None", TypeError, lambda: request(flags=None)),
    ("request empty lists", None, lambda: request(inputs=[], requested_output_names=[])),
    ("response [None]", E, lambda: pb_utils.InferenceResponse(output_tensors=[None])),
    ("response None", TypeError, lambda: pb_utils.InferenceResponse(output_tensors=None)),
    ("response empty", None, lambda: pb_utils.InferenceResponse(output_tensors=[])),
    ("response tensors", None, lambda: pb_utils.InferenceResponse(T)),
    ("tensor name None", TypeError, lambda: pb_utils.Tensor(None, np.asarray([1]))),
    ("tensor data None", TypeError, lambda: pb_utils.Tensor("OUTPUT0", None)),
    ("from_dlpack None", E, lambda: pb_utils.Tensor.from_dlpack("OUTPUT0", None)),
    ("from_dlpack empty name", E, lambda: pb_utils.Tensor.from_dlpack("", None)),
    ("tensor empty name and None", TypeError, lambda: pb_utils.Tensor("", None)),
    ("log level None", TypeError, lambda: pb_utils.Logger.log("x", None)),
    ("log level int", TypeError, lambda: pb_utils.Logger.log("x", 1)),
    ("log_info None", TypeError, lambda: pb_utils.Logger.log_info(None)),
    ("log_warn None", TypeError, lambda: pb_utils.Logger.log_warn(None)),
    ("log_error None", TypeError, lambda: pb_utils.Logger.log_error(None)),
    ("log_verbose None", TypeError, lambda: pb_utils.Logger.log_verbose(None)),
    ("log level unspecified", None, lambda: pb_utils.Logger.log("Level unspecified")),
    ("log with LogLevel", None, lambda: pb_utils.Logger.log("warned", pb_utils.LogLevel.WARNING)),
]


def run(label, exc, f):
    try:
        f()
    except Exception as e:
        if exc is not None and isinstance(e, exc) and not (exc is TypeError and isinstance(e, E)):
            return None
        return f"{label}: raised {type(e).__name__}"
    return None if exc is None else f"{label}: did not raise {exc.__name__}"


class TritonPythonModel:
    def execute(self, requests):
        failed = [m for m in (run(*c) for c in CHECKS) if m]
        return [
            pb_utils.InferenceResponse([
                pb_utils.Tensor("FAILED", np.array(failed or [""], dtype=np.object_)),
                pb_utils.Tensor("CHECKS", np.array([len(CHECKS)], dtype=np.int32)),
            ])
            for _ in requests
        ]
`;

const CONFIG = `name: "argument_validation"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 1 ] } ]
output [ { name: "FAILED", data_type: TYPE_STRING, dims: [ -1 ] }, { name: "CHECKS", data_type: TYPE_INT32, dims: [ 1 ] } ]
`;

let eng: RunningEngine;
pythonEngine(
  () => pythonRepo('l0-py-argval', [], { argument_validation: { config: CONFIG, model: MODEL } }),
  (s) => {
    eng = s.eng;
  },
);

describe('L0_python_argument_validation (Triton L0_backend_python/argument_validation)', () => {
  it("every pb_utils argument check answers as Triton's binding does, and the model still serves", async () => {
    const { status, json } = await httpJson(eng.httpPort, 'POST', '/v2/models/argument_validation/infer', {
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1], data: [1] }],
    });
    expect(status).toBe(200);
    const out = Object.fromEntries(json.outputs.map((o: { name: string; data: unknown[] }) => [o.name, o.data]));
    expect(out.FAILED).toEqual(['']);
    expect(out.CHECKS).toEqual([27]);
  });
});
