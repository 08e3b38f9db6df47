// A model.py's outputs checked against its config on real stub processes, as
// Triton's core and backends check them: a wrong shape, a wrong batch size,
// BYTES or FP64 for an FP32 output, a requested output left out each fail
// that request (INVALID_ARG, Triton's texts, naming the output and the
// model) over gRPC and HTTP; an output that was not asked for may be left
// out; a decoupled model's misfit response reaches its stream as the error;
// the stub keeps serving.
import { describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { grpcError, httpJson, i32Bytes, toF32, toI32, type ProtoClient } from './helpers.ts';
import { pythonRepo, pythonEngine } from './python-support.ts';
import type { RunningEngine } from '../../engine/server/server.ts';

const BAD_OUT = {
  config: `name: "bad_out"
backend: "python"
max_batch_size: 4
input [ { name: "MODE", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [
  { name: "Y", data_type: TYPE_FP32, dims: [ 2 ] },
  { name: "Z", data_type: TYPE_INT32, dims: [ 1 ] }
]
`,
  // MODE 0: fits; 1: Y [b,3]; 2: Y as BYTES; 3: no Z; 4: Y as FP64; 5: Y with batch b+1.
  model: `import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            mode = int(pb_utils.get_input_tensor_by_name(r, "MODE").as_numpy()[0][0])
            b = pb_utils.get_input_tensor_by_name(r, "MODE").as_numpy().shape[0]
            y = np.tile(np.array([[1.5, 2.5]], dtype=np.float32), (b, 1))
            z = np.full((b, 1), 7, dtype=np.int32)
            if mode == 1:
                y = np.zeros((b, 3), dtype=np.float32)
            elif mode == 2:
                y = np.array([[b"a", b"b"]] * b, dtype=np.object_)
            elif mode == 4:
                y = y.astype(np.float64)
            elif mode == 5:
                y = np.zeros((b + 1, 2), dtype=np.float32)
            tensors = [pb_utils.Tensor("Y", y)]
            if mode != 3:
                tensors.append(pb_utils.Tensor("Z", z))
            out.append(pb_utils.InferenceResponse(tensors))
        return out
`,
};

const BAD_STREAM = {
  config: `name: "bad_stream"
backend: "python"
model_transaction_policy { decoupled: true }
input [ { name: "IN", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "OUT", data_type: TYPE_INT32, dims: [ 1 ] } ]
`,
  // Streams OUT = 0 (fits), then OUT as FP32 (does not), then OUT = 2 (fits).
  model: `import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for r in requests:
            s = r.get_response_sender()
            s.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([0], dtype=np.int32))]))
            s.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([1.0], dtype=np.float32))]))
            s.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([2], dtype=np.int32))]))
            s.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
`,
};

let eng: RunningEngine;
let client: ProtoClient;

pythonEngine(
  () => pythonRepo('l0-py-outputs', [], { bad_out: BAD_OUT, bad_stream: BAD_STREAM }),
  (s) => ({ eng, client } = s),
);

const grpcInfer = (mode: number, outputs?: string[]) =>
  client.call('ModelInfer', {
    model_name: 'bad_out',
    inputs: [{ name: 'MODE', datatype: 'INT32', shape: [1, 1] }],
    raw_input_contents: [i32Bytes([mode])],
    outputs: (outputs ?? []).map((name) => ({ name })),
  });

describe('L0_python_outputs', () => {
  it('a response that fits the config answers as before', async () => {
    const r = await grpcInfer(0);
    expect(r.outputs.map((o: { name: string; shape: string[] }) => [o.name, o.shape.map(Number)])).toEqual([['Y', [1, 2]], ['Z', [1, 1]]]);
    expect(Array.from(toF32(r.raw_output_contents[0]))).toEqual([1.5, 2.5]);
    expect(Array.from(toI32(r.raw_output_contents[1]))).toEqual([7]);
  });

  it.each([
    [1, "unexpected shape for output 'Y', model configuration shape is [-1,2], inference shape is [1,3] for model 'bad_out'"],
    [2, "unexpected datatype TYPE_STRING for inference output 'Y', expecting TYPE_FP32 for model 'bad_out'"],
    [3, "output 'Z' of model 'bad_out' is missing from the response (it was requested)"],
    [4, "unexpected datatype TYPE_FP64 for inference output 'Y', expecting TYPE_FP32 for model 'bad_out'"],
    [5, "unexpected shape for output 'Y', model configuration shape is [-1,2], inference shape is [2,2] for model 'bad_out' (the request's batch size is 1)"],
  ])('mode %i fails the request naming the output, over gRPC and HTTP', async (mode, message) => {
    expect(await grpcError(grpcInfer(mode))).toEqual({ code: grpc.status.INVALID_ARGUMENT, details: message });
    const http = await httpJson(eng.httpPort, 'POST', '/v2/models/bad_out/infer', { inputs: [{ name: 'MODE', datatype: 'INT32', shape: [1, 1], data: [mode] }] });
    expect(http).toEqual({ status: 400, json: { error: message } });
  });

  it('an output that was not requested may be left out; the stub kept serving through the failures', async () => {
    const r = await grpcInfer(3, ['Y']);
    expect(r.outputs.map((o: { name: string }) => o.name)).toEqual(['Y']);
    expect(Array.from(toF32(r.raw_output_contents[0]))).toEqual([1.5, 2.5]);
    expect(eng.server.modelStatistics('bad_out')[0]!.execution_count).toBeGreaterThanOrEqual(12);
  });

  it("a decoupled model's misfit response reaches the stream as its error, the others as they are", async () => {
    const got: Array<number | string> = [];
    await new Promise<void>((resolve, reject) => {
      const call = client.raw.ModelStreamInfer() as grpc.ClientDuplexStream<unknown, { error_message: string; infer_response: { raw_output_contents: Buffer[] } }>;
      call.on('data', (m) => got.push(m.error_message || toI32(m.infer_response.raw_output_contents[0]!)[0]!));
      call.on('error', reject);
      call.on('end', resolve);
      call.write({ model_name: 'bad_stream', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }], raw_input_contents: [i32Bytes([1])] });
      call.end();
    });
    expect(got).toEqual([0, "unexpected datatype TYPE_FP32 for inference output 'OUT', expecting TYPE_INT32 for model 'bad_stream'", 2]);
  });
});
