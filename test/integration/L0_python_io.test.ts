// Requested outputs on python models (Triton's L0_backend_python/io cases
// that need no GPU): a plain model answers only the outputs asked for, all
// of them when none are named (test_requested_output_default, on the
// add_sub example); a decoupled model's every streamed response is filtered
// the same way (test_requested_output_decoupled, our CPU identity model
// sending two responses); and a decoupled model that makes a BYTES output
// and an unrequested INT32 one streams the requested one without failing
// (test_requested_output_decoupled_prior_crash). Real stubs, gRPC.
import { describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { decodeBytesTensor, f32Bytes, toF32, type ProtoClient } from './helpers.ts';
import { pythonEngine, pythonRepo } from './python-support.ts';

const IDENTITY_DECOUPLED = {
  config: `name: "io_identity_decoupled"
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ -1 ] }, { name: "GPU_OUTPUT", data_type: TYPE_BOOL, dims: [ -1 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ -1 ] }, { name: "NEXT_GPU_OUTPUT", data_type: TYPE_BOOL, dims: [ -1 ] } ]
`,
  model: `import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()
            flags = pb_utils.get_input_tensor_by_name(r, "GPU_OUTPUT").as_numpy()
            sender = r.get_response_sender()
            for _ in range(2):
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x), pb_utils.Tensor("NEXT_GPU_OUTPUT", flags[1:])]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
`,
};
const LLM = {
  config: `name: "llm"
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "text_input", data_type: TYPE_STRING, dims: [ 1, 1 ] } ]
output [ { name: "text_output", data_type: TYPE_STRING, dims: [ -1 ] }, { name: "sequence_index", data_type: TYPE_INT32, dims: [ 1, 1 ] } ]
`,
  model: `import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        cfg = pb_utils.get_output_config_by_name(json.loads(args["model_config"]), "text_output")
        self.dtype = pb_utils.triton_string_to_numpy(cfg["data_type"])

    def execute(self, requests):
        for r in requests:
            sender = r.get_response_sender()
            text = np.array(["out0".encode("utf8")]).astype(self.dtype)
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("text_output", text),
                                                    pb_utils.Tensor("sequence_index", np.array([[0]], dtype=np.int32))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
`,
};

let client: ProtoClient;
pythonEngine(
  () => pythonRepo('l0-py-io', ['add_sub'], { io_identity_decoupled: IDENTITY_DECOUPLED, llm: LLM }),
  (s) => {
    client = s.client;
  },
);

type Out = { name: string; datatype: string; shape: string[] };
type Msg = { error_message: string; infer_response: { outputs: Out[]; raw_output_contents: Buffer[] } };

/** One request on a ModelStreamInfer stream; every message until the server ends the stream. */
function stream(request: object): Promise<Msg[]> {
  const got: Msg[] = [];
  return new Promise((resolve, reject) => {
    const call = client.raw.ModelStreamInfer() as grpc.ClientDuplexStream<unknown, Msg>;
    call.on('data', (m) => got.push(m));
    call.on('error', reject);
    call.on('end', () => resolve(got));
    call.write(request);
    call.end();
  });
}
const named = (m: Msg, name: string) => m.infer_response.raw_output_contents[m.infer_response.outputs.findIndex((o) => o.name === name)]!;

describe('L0_python_io (Triton L0_backend_python/io, CPU cases)', () => {
  const x = [0.5, 1.5, 2.5, 3.5];
  const y = [0.25, 0.5, 0.75, 1];

  it('test_requested_output_default: only the requested output; all without any named', async () => {
    const req = {
      model_name: 'add_sub',
      inputs: [
        { name: 'INPUT0', datatype: 'FP32', shape: [4] },
        { name: 'INPUT1', datatype: 'FP32', shape: [4] },
      ],
      raw_input_contents: [f32Bytes(x), f32Bytes(y)],
    };
    const one = await client.call('ModelInfer', { ...req, outputs: [{ name: 'OUTPUT1' }] });
    expect(one.outputs.map((o: Out) => o.name)).toEqual(['OUTPUT1']);
    expect(Array.from(toF32(one.raw_output_contents[0]))).toEqual(x.map((v, i) => v - y[i]!));
    const all = await client.call('ModelInfer', req);
    expect(all.outputs.map((o: Out) => o.name)).toEqual(['OUTPUT0', 'OUTPUT1']);
    expect(Array.from(toF32(all.raw_output_contents[0]))).toEqual(x.map((v, i) => v + y[i]!));
    expect(Array.from(toF32(all.raw_output_contents[1]))).toEqual(x.map((v, i) => v - y[i]!));
  });

  it('test_requested_output_decoupled: each of the two responses carries only OUTPUT0; without a request, both outputs', async () => {
    const flags = [true, false, true, true];
    const req = {
      model_name: 'io_identity_decoupled',
      inputs: [
        { name: 'INPUT0', datatype: 'FP32', shape: [4] },
        { name: 'GPU_OUTPUT', datatype: 'BOOL', shape: [4] },
      ],
      raw_input_contents: [f32Bytes(x), Buffer.from(flags.map(Number))],
    };
    const some = await stream({ ...req, outputs: [{ name: 'OUTPUT0' }] });
    expect(some.map((m) => m.error_message)).toEqual(['', '']);
    for (const m of some) {
      expect(m.infer_response.outputs.map((o) => o.name)).toEqual(['OUTPUT0']);
      expect(Array.from(toF32(named(m, 'OUTPUT0')))).toEqual(x);
    }
    const all = await stream(req);
    expect(all.length).toBe(2);
    for (const m of all) {
      expect(m.infer_response.outputs.map((o) => o.name).sort()).toEqual(['NEXT_GPU_OUTPUT', 'OUTPUT0']);
      expect(Array.from(named(m, 'NEXT_GPU_OUTPUT')).map(Boolean)).toEqual(flags.slice(1));
    }
  });

  it('test_requested_output_decoupled_prior_crash: text_output streams, the unrequested output dropped', async () => {
    const text = Buffer.from('test');
    const len = Buffer.alloc(4);
    len.writeUInt32LE(text.length);
    const msgs = await stream({
      model_name: 'llm',
      inputs: [{ name: 'text_input', datatype: 'BYTES', shape: [1, 1] }],
      raw_input_contents: [Buffer.concat([len, text])],
      outputs: [{ name: 'text_output' }],
    });
    expect(msgs.map((m) => m.error_message)).toEqual(['']);
    expect(msgs[0]!.infer_response.outputs.map((o) => o.name)).toEqual(['text_output']);
    expect(decodeBytesTensor(named(msgs[0]!, 'text_output')).map(String).join('')).toBe('out0');
  });
});
