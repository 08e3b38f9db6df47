// Triton's L0_backend_python parameters and bls behaviours on real stubs:
// InferenceResponse(parameters=...) reaches the client over gRPC (also each
// streamed response of a decoupled model) and HTTP, bad ones are refused
// with Triton's texts, BLS responses carry their parameters, and a BLS call
// takes its model name as bytes (Triton's bls example reads it from a BYTES
// tensor).
import { describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { decodeBytesTensor, encodeBytesTensor, f32Bytes, grpcError, httpJson, toF32, type ProtoClient } from './helpers.ts';
import { pythonRepo, pythonEngine } from './python-support.ts';
import type { RunningEngine } from '../../engine/server/server.ts';

const PARAMS_IO = `input [ { name: "RESPONSE_PARAMETERS", data_type: TYPE_STRING, dims: [ 1, 1 ] } ]
output [ { name: "OUTPUT", data_type: TYPE_STRING, dims: [ 1, 1 ] } ]
`;

// As Triton's qa response_parameters model: the JSON input becomes the
// response's parameters (digit keys turned into ints to test non-str keys);
// a refusal becomes an INVALID_ARG response carrying the exception's text.
const RESPONSE_PARAMETERS = {
  config: `name: "response_parameters"\nbackend: "python"\nmax_batch_size: 0\n${PARAMS_IO}`,
  model: `import json
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            text = str(pb_utils.get_input_tensor_by_name(request, "RESPONSE_PARAMETERS").as_numpy()[0][0], encoding="utf-8")
            out = pb_utils.Tensor("OUTPUT", np.array([[text]], dtype=np.object_))
            try:
                params = json.loads(text)
                if isinstance(params, dict):
                    params = {(int(k) if k.isdigit() else k): v for k, v in params.items()}
                response = pb_utils.InferenceResponse(output_tensors=[out], parameters=params)
                if json.loads(response.parameters()) != params:
                    raise Exception("parameters read back differ")
            except Exception as e:
                response = pb_utils.InferenceResponse(error=pb_utils.TritonError(message=str(e), code=pb_utils.TritonError.INVALID_ARG))
            responses.append(response)
        return responses
`,
};

// Decoupled: one response per entry of the JSON list, then the final flag alone.
const RESPONSE_PARAMETERS_DECOUPLED = {
  config: `name: "response_parameters_decoupled"\nbackend: "python"\nmax_batch_size: 0\nmodel_transaction_policy { decoupled: true }\n${PARAMS_IO}`,
  model: `import json
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            text = str(pb_utils.get_input_tensor_by_name(request, "RESPONSE_PARAMETERS").as_numpy()[0][0], encoding="utf-8")
            sender = request.get_response_sender()
            for params in json.loads(text):
                out = pb_utils.Tensor("OUTPUT", np.array([[json.dumps(params)]], dtype=np.object_))
                sender.send(pb_utils.InferenceResponse(output_tensors=[out], parameters=params))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
`,
};

// BLS on both: the plain response's parameters, and every decoupled response's, read back.
const RESPONSE_PARAMETERS_BLS = {
  config: `name: "response_parameters_bls"
backend: "python"
max_batch_size: 0
input [
  { name: "RESPONSE_PARAMETERS", data_type: TYPE_STRING, dims: [ 1, 1 ] },
  { name: "RESPONSE_PARAMETERS_DECOUPLED", data_type: TYPE_STRING, dims: [ 1, 1 ] }
]
output [ { name: "OUTPUT", data_type: TYPE_STRING, dims: [ 1, 1 ] } ]
`,
  model: `import json
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            plain = pb_utils.get_input_tensor_by_name(request, "RESPONSE_PARAMETERS")
            streamed = pb_utils.get_input_tensor_by_name(request, "RESPONSE_PARAMETERS_DECOUPLED")
            ok = True
            r = pb_utils.InferenceRequest(model_name="response_parameters", inputs=[plain], requested_output_names=["OUTPUT"]).exec()
            ok = ok and not r.has_error() and json.loads(r.parameters()) == json.loads(str(plain.as_numpy()[0][0], encoding="utf-8"))
            expected = json.loads(str(streamed.as_numpy()[0][0], encoding="utf-8"))
            rs = pb_utils.InferenceRequest(
                model_name="response_parameters_decoupled",
                inputs=[pb_utils.Tensor("RESPONSE_PARAMETERS", streamed.as_numpy())],
                requested_output_names=["OUTPUT"]).exec(decoupled=True)
            got = [json.loads(x.parameters()) for x in rs if len(x.output_tensors()) > 0]
            ok = ok and got == expected
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", np.array([[str(ok)]], dtype=np.object_))]))
        return responses
`,
};

// Triton's bls example, shortened: the model to call comes from a BYTES tensor (bytes in numpy).
const BLS_BY_NAME = {
  config: `name: "bls_by_name"
backend: "python"
max_batch_size: 0
input [
  { name: "MODEL_NAME", data_type: TYPE_STRING, dims: [ 1 ] },
  { name: "INPUT0", data_type: TYPE_FP32, dims: [ 4 ] },
  { name: "INPUT1", data_type: TYPE_FP32, dims: [ 4 ] }
]
output [
  { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 4 ] },
  { name: "OUTPUT1", data_type: TYPE_FP32, dims: [ 4 ] }
]
`,
  model: `import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            model_name = pb_utils.get_input_tensor_by_name(request, "MODEL_NAME").as_numpy()[0]
            assert isinstance(model_name, bytes)
            in_0 = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            in_1 = pb_utils.get_input_tensor_by_name(request, "INPUT1")
            r = pb_utils.InferenceRequest(model_name=model_name, requested_output_names=[b"OUTPUT0", "OUTPUT1"],
                                          inputs=[in_0, in_1], request_id=b"from-bytes").exec()
            if r.has_error():
                raise pb_utils.TritonModelException(r.error().message())
            responses.append(pb_utils.InferenceResponse([
                pb_utils.get_output_tensor_by_name(r, "OUTPUT0"),
                pb_utils.get_output_tensor_by_name(r, "OUTPUT1"),
            ]))
        return responses
`,
};

// As Triton's qa bls_parameters model: each level adds bool_N, int_N, str_N to
// the request's parameters and calls itself through BLS with them (4 instances).
const BLS_PARAMETERS = {
  config: `name: "bls_parameters"
backend: "python"
max_batch_size: 0
input [ { name: "NUMBER_PARAMETERS", data_type: TYPE_UINT8, dims: [ 1 ] } ]
output [ { name: "PARAMETERS_AGGREGATED", data_type: TYPE_STRING, dims: [ 1 ] } ]
instance_group [ { count: 4 kind: KIND_CPU } ]
`,
  model: `import json
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "NUMBER_PARAMETERS").as_numpy()[0])
            params = json.loads(request.parameters())
            if n == 0:
                tensors = [pb_utils.Tensor("PARAMETERS_AGGREGATED", np.array([json.dumps(params)], dtype=np.object_))]
            else:
                params.update({"bool_%d" % n: bool(n), "int_%d" % n: n, "str_%d" % n: str(n)})
                call = pb_utils.InferenceRequest(model_name="bls_parameters", parameters=params,
                                                 inputs=[pb_utils.Tensor("NUMBER_PARAMETERS", np.array([n - 1], dtype=np.uint8))],
                                                 requested_output_names=["PARAMETERS_AGGREGATED"])
                tensors = call.exec().output_tensors()
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
        return responses
`,
};

let eng: RunningEngine;
let client: ProtoClient;

type Param = { bool_param?: boolean; int64_param?: string; string_param?: string };
const plainParams = (p: Record<string, Param> | undefined) =>
  Object.fromEntries(
    Object.entries(p ?? {}).map(([k, v]) => [k, v.bool_param ?? (v.int64_param !== undefined ? Number(v.int64_param) : v.string_param)]),
  );
const paramsInput = (name: string, _json: unknown) => ({ name, datatype: 'BYTES', shape: [1, 1] });

pythonEngine(
  () =>
    pythonRepo('l0-pyparams', ['add_sub'], {
      response_parameters: RESPONSE_PARAMETERS,
      response_parameters_decoupled: RESPONSE_PARAMETERS_DECOUPLED,
      response_parameters_bls: RESPONSE_PARAMETERS_BLS,
      bls_by_name: BLS_BY_NAME,
      bls_parameters: BLS_PARAMETERS,
    }),
  (s) => ({ eng, client } = s),
  { controlMode: 'explicit', loadModels: ['*'] },
);

const infer = (params: unknown) =>
  client.call('ModelInfer', {
    model_name: 'response_parameters',
    inputs: [paramsInput('RESPONSE_PARAMETERS', params)],
    raw_input_contents: [encodeBytesTensor([JSON.stringify(params)])],
  });

describe('L0_python_parameters', () => {
  it('response parameters reach the gRPC client, typed, and the output echoes the input', async () => {
    for (const params of [
      {},
      { many_elements: false },
      { bool: true, str: 'Hello World!', int: 1024 },
      { a: '1', b: '2', c: 3, d: false, e: 5, f: '' },
    ]) {
      const res = await infer(params);
      expect(plainParams(res.parameters)).toEqual(params);
      expect(decodeBytesTensor(res.raw_output_contents[0])[0]!.toString()).toBe(JSON.stringify(params));
    }
    const typed = await infer({ bool: true, str: 'x', int: 7 });
    expect(typed.parameters).toMatchObject({ bool: { bool_param: true }, str: { string_param: 'x' }, int: { int64_param: '7' } });
  });

  it('response parameters reach the HTTP client', async () => {
    const params = { bool: false, str: 'Hello', int: -3 };
    const h = await httpJson(eng.httpPort, 'POST', '/v2/models/response_parameters/infer', {
      inputs: [{ name: 'RESPONSE_PARAMETERS', datatype: 'BYTES', shape: [1, 1], data: [JSON.stringify(params)] }],
    });
    expect(h.status).toBe(200);
    expect(h.json.parameters).toEqual(params);
  });

  it("invalid parameters are refused with Triton's texts (INVALID_ARGUMENT)", async () => {
    const cases: Array<[unknown, string]> = [
      [[], ", got <class 'list'>"],
      [{ '1': 'int key' }, "Expect parameters keys to have type str, found type <class 'int'>"],
      [{ int: 2, float: 0.5 }, "Expect parameters values to have type bool/int/str, found type <class 'float'>"],
      [{ bool: true, null: null }, "Expect parameters values to have type bool/int/str, found type <class 'NoneType'>"],
      [{ str: '', list: ['variable'] }, "Expect parameters values to have type bool/int/str, found type <class 'list'>"],
    ];
    for (const [params, text] of cases) {
      const e = await grpcError(infer(params));
      expect(e.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(e.details).toContain(text);
    }
  });

  it('a decoupled model: each streamed response carries its parameters and triton_final_response false', async () => {
    const params = [{ bool: false, int: 2048 }, { str: 'Hello World!' }];
    const got: Array<{ error: string; params: Record<string, unknown>; out: string }> = [];
    await new Promise<void>((resolve, reject) => {
      const call = client.raw.ModelStreamInfer() as grpc.ClientDuplexStream<
        unknown,
        { error_message: string; infer_response: { parameters: Record<string, Param>; raw_output_contents: Buffer[] } }
      >;
      call.on('data', (m) =>
        got.push({
          error: m.error_message,
          params: plainParams(m.infer_response.parameters),
          out: decodeBytesTensor(m.infer_response.raw_output_contents[0]!)[0]!.toString(),
        }),
      );
      call.on('error', reject);
      call.on('end', resolve);
      call.write({
        model_name: 'response_parameters_decoupled',
        inputs: [paramsInput('RESPONSE_PARAMETERS', params)],
        raw_input_contents: [encodeBytesTensor([JSON.stringify(params)])],
      });
      call.end();
    });
    expect(got.map((g) => ({ ...g, out: JSON.parse(g.out) }))).toEqual(
      params.map((p) => ({ error: '', params: { ...p, triton_final_response: false }, out: p })),
    );
  });

  it('BLS responses carry their parameters, plain and decoupled', async () => {
    const plain = { bool: false, int: 2048, str: 'Hello World!' };
    const streamed = [{}, { bool: true, int: 10000 }, { str: '?' }];
    const res = await client.call('ModelInfer', {
      model_name: 'response_parameters_bls',
      inputs: [paramsInput('RESPONSE_PARAMETERS', plain), paramsInput('RESPONSE_PARAMETERS_DECOUPLED', streamed)],
      raw_input_contents: [encodeBytesTensor([JSON.stringify(plain)]), encodeBytesTensor([JSON.stringify(streamed)])],
    });
    expect(decodeBytesTensor(res.raw_output_contents[0])[0]!.toString()).toBe('True');
  });

  it("BLS request parameters reach the called model (recursive, as Triton's bls_parameters test)", async () => {
    const res = await client.call('ModelInfer', {
      model_name: 'bls_parameters',
      inputs: [{ name: 'NUMBER_PARAMETERS', datatype: 'UINT8', shape: [1] }],
      raw_input_contents: [Buffer.from([3])],
    });
    const expected: Record<string, unknown> = {};
    for (let i = 1; i <= 3; i++) Object.assign(expected, { [`bool_${i}`]: true, [`int_${i}`]: i, [`str_${i}`]: String(i) });
    expect(JSON.parse(decodeBytesTensor(res.raw_output_contents[0])[0]!.toString())).toEqual(expected);
  }, 20_000);

  it("BLS takes the model name, output names and request id as bytes (Triton's bls example)", async () => {
    const res = await client.call('ModelInfer', {
      model_name: 'bls_by_name',
      inputs: [
        { name: 'MODEL_NAME', datatype: 'BYTES', shape: [1] },
        { name: 'INPUT0', datatype: 'FP32', shape: [4] },
        { name: 'INPUT1', datatype: 'FP32', shape: [4] },
      ],
      raw_input_contents: [encodeBytesTensor(['add_sub']), f32Bytes([1, 2, 3, 4]), f32Bytes([0.5, 0.5, 0.5, 0.5])],
    });
    expect(Array.from(toF32(res.raw_output_contents[0]))).toEqual([1.5, 2.5, 3.5, 4.5]);
    expect(Array.from(toF32(res.raw_output_contents[1]))).toEqual([0.5, 1.5, 2.5, 3.5]);

    // The example's third call: a model that is not there, in Triton's words.
    const e = await grpcError(
      client.call('ModelInfer', {
        model_name: 'bls_by_name',
        inputs: [
          { name: 'MODEL_NAME', datatype: 'BYTES', shape: [1] },
          { name: 'INPUT0', datatype: 'FP32', shape: [4] },
          { name: 'INPUT1', datatype: 'FP32', shape: [4] },
        ],
        raw_input_contents: [encodeBytesTensor(['undefined_model']), f32Bytes([1, 2, 3, 4]), f32Bytes([1, 1, 1, 1])],
      }),
    );
    expect(e.details).toContain(
      "Failed to process the request(s) for model instance 'bls_by_name_0_0', message: TritonModelException: Failed for execute the inference request. Model 'undefined_model' is not ready.",
    );
  });
});
