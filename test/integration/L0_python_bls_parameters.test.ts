// BLS request parameters carried through a chain of calls (Triton's
// L0_backend_python/bls bls_parameters_test.py): a model with 4 instances
// calls itself N times, each call adding bool_i, int_i and str_i to the
// parameters it received, and the innermost answers them all as JSON; the
// client gets exactly Triton's expected set. Real stubs; our own model.
import { describe, expect, it } from 'vitest';
import { decodeBytesTensor, type ProtoClient } from './helpers.ts';
import { pythonEngine, pythonRepo } from './python-support.ts';

const MODEL = `import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            n = int(pb_utils.get_input_tensor_by_name(r, "NUMBER_PARAMETERS").as_numpy()[0])
            params = json.loads(r.parameters())
            if n == 0:
                text = json.dumps(params).encode("utf-8")
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor("PARAMETERS_AGGREGATED", np.array([text], dtype=np.object_))]))
                continue
            params.update({f"bool_{n}": bool(n), f"int_{n}": n, f"str_{n}": str(n)})
            res = pb_utils.InferenceRequest(
                model_name="bls_parameters", requested_output_names=["PARAMETERS_AGGREGATED"], parameters=params,
                inputs=[pb_utils.Tensor("NUMBER_PARAMETERS", np.array([n - 1], dtype=np.ubyte))]).exec()
            if res.has_error():
                raise pb_utils.TritonModelException(res.error().message())
            out.append(pb_utils.InferenceResponse([pb_utils.get_output_tensor_by_name(res, "PARAMETERS_AGGREGATED")]))
        return out
`;
const CONFIG = `name: "bls_parameters"
backend: "python"
max_batch_size: 0
input [ { name: "NUMBER_PARAMETERS", data_type: TYPE_UINT8, dims: [ 1 ] } ]
output [ { name: "PARAMETERS_AGGREGATED", data_type: TYPE_STRING, dims: [ 1 ] } ]
instance_group [ { count: 4, kind: KIND_CPU } ]
`;

let client: ProtoClient;
pythonEngine(
  () => pythonRepo('l0-py-bls-params', [], { bls_parameters: { config: CONFIG, model: MODEL } }),
  (s) => {
    client = s.client;
  },
);

describe('L0_python_bls_parameters (Triton bls_parameters_test.py)', () => {
  it('three nested BLS calls carry every parameter type to the innermost', async () => {
    const r = await client.call('ModelInfer', {
      model_name: 'bls_parameters',
      inputs: [{ name: 'NUMBER_PARAMETERS', datatype: 'UINT8', shape: [1] }],
      raw_input_contents: [Buffer.from([3])],
      outputs: [{ name: 'PARAMETERS_AGGREGATED' }],
    });
    const json = JSON.parse(String(decodeBytesTensor(r.raw_output_contents[0])[0]));
    const expected: Record<string, unknown> = {};
    for (let i = 1; i <= 3; i++) Object.assign(expected, { [`bool_${i}`]: Boolean(i), [`int_${i}`]: i, [`str_${i}`]: String(i) });
    expect(json).toEqual(expected);
  });
});
