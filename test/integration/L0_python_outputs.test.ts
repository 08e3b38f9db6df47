// A model.py's outputs as Triton's python backend sends them, on real stub
// processes: as the model made them. The backend checks no datatype or shape
// against the config (a wrong shape, a wrong batch size, BYTES or FP64 for an
// FP32 output reach the client as made), a requested output the model left
// out is simply absent, an output nobody asked for is dropped (the backend
// prunes to the requested ones), and a decoupled model's responses stream as
// made; python_test.py's test_init_args shape (an output of shape [1] for a
// [2,2] request of a max_batch_size 64 model with dims [-1]) answers as made.
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

// After Triton's init_args qa model: the answer's shape has nothing to do with the request's.
const INIT_ARGS = {
  config: `name: "init_args_like"
backend: "python"
max_batch_size: 64
input [ { name: "IN", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "OUT", data_type: TYPE_FP32, dims: [ -1 ] } ]
`,
  model: `import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.keys = len(args)

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([self.keys], dtype=np.float32))]) for _ in requests]
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
  () => pythonRepo('l0-py-outputs', [], { bad_out: BAD_OUT, bad_stream: BAD_STREAM, init_args_like: INIT_ARGS }),
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
    expect(r.outputs.map((o: { name: string; shape: string[] }) => [o.name, o.shape.map(Number)])).toEqual([
      ['Y', [1, 2]],
      ['Z', [1, 1]],
    ]);
    expect(Array.from(toF32(r.raw_output_contents[0]))).toEqual([1.5, 2.5]);
    expect(Array.from(toI32(r.raw_output_contents[1]))).toEqual([7]);
  });

  // What each mode makes of Y and Z (name, datatype, shape) for a batch-1 request: exactly what comes back.
  it.each([
    [
      1,
      [
        ['Y', 'FP32', [1, 3]],
        ['Z', 'INT32', [1, 1]],
      ],
    ],
    [
      2,
      [
        ['Y', 'BYTES', [1, 2]],
        ['Z', 'INT32', [1, 1]],
      ],
    ],
    [3, [['Y', 'FP32', [1, 2]]]],
    [
      4,
      [
        ['Y', 'FP64', [1, 2]],
        ['Z', 'INT32', [1, 1]],
      ],
    ],
    [
      5,
      [
        ['Y', 'FP32', [2, 2]],
        ['Z', 'INT32', [1, 1]],
      ],
    ],
  ])('mode %i answers the outputs as the model made them, over gRPC and HTTP', async (mode, want) => {
    const r = await grpcInfer(mode);
    expect(r.outputs.map((o: { name: string; datatype: string; shape: string[] }) => [o.name, o.datatype, o.shape.map(Number)])).toEqual(
      want,
    );
    const http = await httpJson(eng.httpPort, 'POST', '/v2/models/bad_out/infer', {
      inputs: [{ name: 'MODE', datatype: 'INT32', shape: [1, 1], data: [mode] }],
    });
    expect(http.status).toBe(200);
    expect(
      (http.json.outputs as Array<{ name: string; datatype: string; shape: number[] }>).map((o) => [o.name, o.datatype, o.shape]),
    ).toEqual(want);
  });

  it('only the requested outputs come back; the stub kept serving', async () => {
    const r = await grpcInfer(4, ['Z']);
    expect(r.outputs.map((o: { name: string }) => o.name)).toEqual(['Z']);
    expect(Array.from(toI32(r.raw_output_contents[0]))).toEqual([7]);
    expect(eng.server.modelStatistics('bad_out')[0]!.execution_count).toBeGreaterThanOrEqual(11);
  });

  it("test_init_args' shape: an output of shape [1] for a [2,2] request", async () => {
    const http = await httpJson(eng.httpPort, 'POST', '/v2/models/init_args_like/infer', {
      inputs: [{ name: 'IN', datatype: 'FP32', shape: [2, 2], data: [1, 2, 3, 4] }],
    });
    expect(http.status).toBe(200);
    expect(http.json.outputs).toEqual([{ name: 'OUT', datatype: 'FP32', shape: [1], data: [7] }]);
  });

  it("a decoupled model's responses stream as made, an FP32 one for an INT32 output included", async () => {
    const got: Array<number | string> = [];
    await new Promise<void>((resolve, reject) => {
      const call = client.raw.ModelStreamInfer() as grpc.ClientDuplexStream<
        unknown,
        { error_message: string; infer_response: { raw_output_contents: Buffer[]; outputs: Array<{ datatype: string }> } }
      >;
      call.on('data', (m) => {
        const raw = m.infer_response.raw_output_contents[0]!;
        got.push(
          m.error_message || (raw.length === 4 && m.infer_response.outputs[0]?.datatype === 'FP32' ? toF32(raw)[0]! : toI32(raw)[0]!),
        );
      });
      call.on('error', reject);
      call.on('end', resolve);
      call.write({
        model_name: 'bad_stream',
        inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }],
        raw_input_contents: [i32Bytes([1])],
      });
      call.end();
    });
    expect(got).toEqual([0, 1, 2]);
  });
});
