// Triton's L0_backend_python/decoupled cases (decoupled_test.py) on real
// stubs, with models written for this suite that behave as Triton's do: an
// error for one request does not fail the next (execute_error); BLS from a
// decoupled model (bls) and a BLS stream forwarded response by response
// (bls_stream: 4, 2, 0 and 1 responses by request id); execute returning
// responses is refused with Triton's text (return_response_error); a send
// after the final flag reaches no client (send_after_close_error); ten
// raised exceptions answer ten errors and leave the model ready
// (raise_exception). test_decoupled_execute_cancel is `L0_python_decoupled`'s
// stream-close case.
import { describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { f32Bytes, httpJson, i32Bytes, toF32, toI32, type ProtoClient } from './helpers.ts';
import { pythonEngine, pythonRepo } from './python-support.ts';
import type { RunningEngine } from '../../engine/server/server.ts';

const cfg = (name: string, io: string, decoupled = true) => `name: "${name}"
backend: "python"
max_batch_size: 0
${decoupled ? 'model_transaction_policy { decoupled: true }\n' : ''}${io}
`;
const FP =
  'input [ { name: "IN", data_type: TYPE_FP32, dims: [ -1, -1 ] } ]\noutput [ { name: "OUT", data_type: TYPE_FP32, dims: [ -1, -1 ] } ]';
const I32 = 'input [ { name: "IN", data_type: TYPE_INT32, dims: [ 1 ] } ]\noutput [ { name: "OUT", data_type: TYPE_INT32, dims: [ 1 ] } ]';
const ADD_SUB =
  'input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 16 ] }, { name: "INPUT1", data_type: TYPE_FP32, dims: [ 16 ] } ]\noutput [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 16 ] } ]';
const HEAD = 'import asyncio\nimport numpy as np\nimport triton_python_backend_utils as pb_utils\n\n\n';
const FINAL = 'pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL';

const MODELS: Record<string, { config: string; model: string }> = {
  identity_fp32: {
    config: cfg('identity_fp32', FP, false),
    model: `${HEAD}class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy())]) for r in requests]
`,
  },
  square_int32: {
    config: cfg('square_int32', I32),
    model: `${HEAD}class TritonPythonModel:
    def execute(self, requests):
        for r in requests:
            n = int(pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()[0])
            s = r.get_response_sender()
            for _ in range(n):
                s.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([n], dtype=np.int32))]))
            s.send(flags=${FINAL})
        return None
`,
  },
  decoupled_execute_error: {
    config: cfg('decoupled_execute_error', FP),
    model: `${HEAD}class TritonPythonModel:
    def initialize(self, args):
        self.seen = 0

    def execute(self, requests):
        for r in requests:
            s = r.get_response_sender()
            self.seen += 1
            if self.seen == 1:
                s.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("first request fails")), flags=${FINAL})
                continue
            s.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy())]), flags=${FINAL})
        return None
`,
  },
  decoupled_bls: {
    config: cfg('decoupled_bls', FP),
    model: `${HEAD}def call(x):
    return pb_utils.InferenceRequest(model_name="identity_fp32", inputs=[pb_utils.Tensor("IN", x)], requested_output_names=["OUT"])


class TritonPythonModel:
    def execute(self, requests):
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()
            sync = call(x).exec()
            both = asyncio.run(call(x).async_exec())
            out = pb_utils.get_output_tensor_by_name(sync, "OUT").as_numpy()
            same = np.array_equal(out, pb_utils.get_output_tensor_by_name(both, "OUT").as_numpy())
            s = r.get_response_sender()
            if not same or sync.has_error() or both.has_error():
                s.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("sync and async BLS differ")), flags=${FINAL})
            else:
                s.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]), flags=${FINAL})
        return None
`,
  },
  decoupled_bls_stream: {
    config: cfg('decoupled_bls_stream', I32),
    model: `${HEAD}class TritonPythonModel:
    def execute(self, requests):
        for r in requests:
            s = r.get_response_sender()
            req = pb_utils.InferenceRequest(model_name="square_int32", requested_output_names=["OUT"],
                                            inputs=[pb_utils.get_input_tensor_by_name(r, "IN")])
            for resp in req.exec(decoupled=True):
                if resp.has_error():
                    s.send(pb_utils.InferenceResponse(error=resp.error()))
                elif resp.output_tensors():
                    s.send(pb_utils.InferenceResponse([pb_utils.get_output_tensor_by_name(resp, "OUT")]))
            s.send(flags=${FINAL})
        return None
`,
  },
  decoupled_return_response_error: {
    config: cfg('decoupled_return_response_error', ADD_SUB),
    model: `${HEAD}class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())]) for r in requests]
`,
  },
  decoupled_send_after_close_error: {
    config: cfg('decoupled_send_after_close_error', ADD_SUB),
    model: `${HEAD}class TritonPythonModel:
    def execute(self, requests):
        for r in requests:
            s = r.get_response_sender()
            s.send(flags=${FINAL})
            s.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())]))
        return None
`,
  },
  decoupled_raise_exception: {
    config: cfg('decoupled_raise_exception', FP),
    model: `${HEAD}class TritonPythonModel:
    def execute(self, requests):
        raise Exception("Intentional Error")
`,
  },
};

let client: ProtoClient;
let eng: RunningEngine;
pythonEngine(
  () => pythonRepo('l0-py-decoupled-qa', [], MODELS),
  (s) => {
    client = s.client;
    eng = s.eng;
  },
);

type Msg = { error_message: string; infer_response: { id: string; raw_output_contents: Buffer[] } };
/** Write `requests` on one stream; collect messages until `count` came (or `ms` passed), then close it. */
function stream(requests: object[], count: number, ms = 20_000): Promise<Msg[]> {
  const got: Msg[] = [];
  return new Promise((resolve, reject) => {
    const call = client.raw.ModelStreamInfer() as grpc.ClientDuplexStream<unknown, Msg>;
    const done = () => {
      clearTimeout(timer);
      call.end();
      resolve(got);
    };
    const timer = setTimeout(done, ms);
    call.on('data', (m) => {
      got.push(m);
      if (got.length === count) done();
    });
    call.on('error', (e) => (got.length >= count ? undefined : reject(e)));
    for (const r of requests) call.write(r);
  });
}
const fpReq = (model: string, v: number[], id = '') => ({
  model_name: model,
  id,
  inputs: [{ name: 'IN', datatype: 'FP32', shape: [2, 2] }],
  raw_input_contents: [f32Bytes(v)],
});
const addSubReq = (model: string) => ({
  model_name: model,
  inputs: [
    { name: 'INPUT0', datatype: 'FP32', shape: [16] },
    { name: 'INPUT1', datatype: 'FP32', shape: [16] },
  ],
  raw_input_contents: [f32Bytes(new Array(16).fill(0.5)), f32Bytes(new Array(16).fill(0.25))],
});

describe('L0_backend_python/decoupled (decoupled_test.py)', () => {
  it('test_decoupled_execute_error: the first request errors, the second answers', async () => {
    const b = [5, 6, 7, 8];
    const msgs = await stream([fpReq('decoupled_execute_error', [1, 2, 3, 4]), fpReq('decoupled_execute_error', b)], 2);
    expect(msgs[0]!.error_message).toContain('first request fails');
    expect(Array.from(toF32(msgs[1]!.infer_response.raw_output_contents[0]!))).toEqual(b);
  });

  it('test_decoupled_bls: sync and async BLS from a decoupled model, OUT equals IN', async () => {
    const x = [0.5, -1, 2, 3.25];
    const [m] = await stream([fpReq('decoupled_bls', x)], 1);
    expect(m!.error_message).toBe('');
    expect(Array.from(toF32(m!.infer_response.raw_output_contents[0]!))).toEqual(x);
  });

  it('test_decoupled_bls_stream: 4, 2, 0 and 1 responses by request id, each OUT its IN', async () => {
    const ins = [4, 2, 0, 1];
    const reqs = ins.map((v, i) => ({
      model_name: 'decoupled_bls_stream',
      id: String(i),
      inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }],
      raw_input_contents: [i32Bytes([v])],
    }));
    const msgs = await stream(reqs, 7, 20_000);
    const byId: Record<string, number[]> = {};
    for (const m of msgs) {
      expect(m.error_message).toBe('');
      (byId[m.infer_response.id] ??= []).push(toI32(m.infer_response.raw_output_contents[0]!)[0]!);
    }
    expect(byId).toEqual({ '0': [4, 4, 4, 4], '1': [2, 2], '3': [1] });
  });

  it("test_decoupled_return_response_error: Triton's text", async () => {
    const [m] = await stream([addSubReq('decoupled_return_response_error')], 1);
    expect(m!.error_message).toBe(
      "Python model 'decoupled_return_response_error_0_0' is using the decoupled mode and the execute function must return None.",
    );
  });

  it('test_decoupled_send_after_close_error: nothing reaches the client', async () => {
    const msgs = await stream([addSubReq('decoupled_send_after_close_error')], 1, 1500);
    expect(msgs).toEqual([]);
  });

  it('test_decoupled_raise_exception: ten errors with the text, the model still ready', async () => {
    const msgs = await stream(
      Array.from({ length: 10 }, (_, i) => fpReq('decoupled_raise_exception', [i, i, i, i])),
      10,
    );
    expect(msgs.length).toBe(10);
    for (const m of msgs) expect(m.error_message).toContain('Intentional Error');
    expect((await httpJson(eng.httpPort, 'GET', '/v2/models/decoupled_raise_exception/ready')).status).toBe(200);
  });
});
