// Triton's triton_grpc_error stream header (docs: "GRPC Status Codes";
// qa/L0_backend_python/lifecycle test_triton_grpc_error_*), on one engine in
// the QA file's order so that each case runs after the ones before it (the
// order in which test_triton_grpc_error_error_off was reported to hang):
// a batch with failed requests on a plain stream left open, a unary call
// cancelled while it runs, then a header stream cancelled by its client, a
// plain stream whose errors stay in the stream, header streams that end
// with INTERNAL on the model's error, alone and two at once. Every wait has
// a deadline: a missing response fails the case instead of hanging it.
import * as grpc from '@grpc/grpc-js';
import { afterAll, describe, expect, it } from 'vitest';
import { f32Bytes, grpcError } from './helpers.ts';
import { pythonEngine, pythonRepo, type PythonEngine } from './python-support.ts';

const PY_CONFIG = (name: string, extra = '') => `name: "${name}"
backend: "python"
max_batch_size: 64
input [ { name: "IN", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "OUT", data_type: TYPE_FP32, dims: [ -1 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
${extra}`;

// Odd requests (1st, 3rd, ...) succeed, even ones answer with the model's error (the QA model's behaviour).
const GRPC_ERROR_MODEL = `import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.count = 1

    def execute(self, requests):
        responses = []
        for request in requests:
            out = pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(request, "IN").as_numpy())
            if self.count % 2:
                responses.append(pb_utils.InferenceResponse([out]))
            else:
                responses.append(pb_utils.InferenceResponse([out], pb_utils.TritonError("An error occurred during execution")))
            self.count += 1
        return responses
`;
// In a batch, the 1st and 3rd requests fail, the 2nd succeeds.
const BATCH_ERROR_MODEL = `import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for i, request in enumerate(requests):
            out = pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(request, "IN").as_numpy())
            responses.append(pb_utils.InferenceResponse([out], pb_utils.TritonError("An Error Occurred")) if i % 2 == 0 else pb_utils.InferenceResponse([out]))
        return responses
`;
// Runs up to 4 s, returning early (CANCELLED) once its request is cancelled.
const CANCEL_MODEL = `import time
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            for _ in range(40):
                if request.is_cancelled():
                    break
                time.sleep(0.1)
            if request.is_cancelled():
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("cancelled", pb_utils.TritonError.CANCELLED)))
            else:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(request, "IN").as_numpy())]))
        return responses
`;

let s: PythonEngine;
pythonEngine(
  () =>
    pythonRepo('l0-py-grpc-error', [], {
      execute_grpc_error: { config: PY_CONFIG('execute_grpc_error'), model: GRPC_ERROR_MODEL },
      execute_error: {
        config: PY_CONFIG('execute_error', 'dynamic_batching { preferred_batch_size: [ 8 ], max_queue_delay_microseconds: 500000 }\n'),
        model: BATCH_ERROR_MODEL,
      },
      execute_cancel: { config: PY_CONFIG('execute_cancel'), model: CANCEL_MODEL },
    }),
  (x) => (s = x),
);
/** Every stream the cases opened: test_batch_error's stays open on purpose, so cancel them before the engine stops (it would wait 5 s to drain them). */
const streams: grpc.ClientDuplexStream<object, { error_message: string }>[] = [];
afterAll(() => {
  for (const c of streams) c.cancel();
});

const request = (model: string) => ({
  model_name: model,
  inputs: [{ name: 'IN', datatype: 'FP32', shape: [2, 2] }],
  raw_input_contents: [f32Bytes([1, 2, 3, 4])],
});

type Event = { data: { error_message: string } } | { status: grpc.StatusObject | grpc.ServiceError };

/** A ModelStreamInfer call whose messages and final status are read one at a time, each within `ms`. */
function openStream(header: boolean) {
  const md = new grpc.Metadata();
  if (header) md.set('triton_grpc_error', 'true');
  const call = s.client.raw.ModelStreamInfer(md) as grpc.ClientDuplexStream<object, { error_message: string }>;
  streams.push(call);
  const events: Event[] = [];
  let wake: (() => void) | undefined;
  const push = (e: Event) => {
    events.push(e);
    wake?.();
  };
  call.on('data', (d: { error_message: string }) => push({ data: d }));
  call.on('error', (e: grpc.ServiceError) => push({ status: e }));
  call.on('status', (st: grpc.StatusObject) => st.code === grpc.status.OK && push({ status: st }));
  return {
    call,
    send: (model: string) => call.write(request(model)),
    async next(ms = 10_000): Promise<Event> {
      const deadline = Date.now() + ms;
      while (events.length === 0) {
        if (Date.now() > deadline) throw new Error(`no response within ${ms} ms: the stream hangs`);
        await new Promise<void>((r) => {
          wake = r;
          setTimeout(r, 50);
        });
      }
      return events.shift()!;
    },
  };
}

describe("L0_python_grpc_error (lifecycle cases in the QA file's order)", () => {
  it('test_batch_error: a plain stream gets each failed request of a batch as an error message; the stream stays open', async () => {
    const st = openStream(false);
    for (let i = 0; i < 3; i++) st.send('execute_error');
    const got = [await st.next(), await st.next(), await st.next()].map((e) =>
      'data' in e ? e.data.error_message : `status ${e.status.code}`,
    );
    expect(got).toEqual(['An Error Occurred', '', 'An Error Occurred']);
    // Left open, as the QA test leaves it, while the next cases run.
  });

  it('test_execute_cancel: a unary call cancelled while it runs', async () => {
    let call: grpc.ClientUnaryCall | undefined;
    const done = grpcError(
      new Promise((resolve, reject) => {
        call = s.client.raw.ModelInfer(
          { ...request('execute_cancel'), inputs: [{ name: 'IN', datatype: 'FP32', shape: [1, 1] }], raw_input_contents: [f32Bytes([4])] },
          (e: Error | null, r: unknown) => (e ? reject(e) : resolve(r)),
        );
      }),
    );
    await new Promise((r) => setTimeout(r, 1000));
    call!.cancel();
    expect((await done).code).toBe(grpc.status.CANCELLED);
  });

  it('test_triton_grpc_error_cancel: a header stream answered once, then cancelled by its client', async () => {
    const st = openStream(true);
    st.send('execute_grpc_error'); // the model's 1st request: succeeds
    const first = await st.next();
    expect('data' in first && first.data.error_message).toBe('');
    st.call.cancel();
    const end = await st.next();
    expect('status' in end && end.status.code).toBe(grpc.status.CANCELLED);
  });

  it('test_triton_grpc_error_error_off: without the header every request is answered in the stream, errors included, and the stream stays open', async () => {
    const st = openStream(false);
    const got: string[] = [];
    for (let i = 0; i < 4; i++) {
      st.send('execute_grpc_error');
      const e = await st.next();
      expect('data' in e).toBe(true);
      got.push((e as { data: { error_message: string } }).data.error_message);
    }
    // The model's 2nd to 5th requests: even ones fail.
    expect(got).toEqual(['An error occurred during execution', '', 'An error occurred during execution', '']);
    st.call.end();
    const end = await st.next();
    expect('status' in end && end.status.code).toBe(grpc.status.OK);
  });

  it("test_triton_grpc_error_error_on: with the header the model's error ends the stream with INTERNAL and its message", async () => {
    const st = openStream(true);
    st.send('execute_grpc_error'); // 6th: fails
    const end = await st.next();
    expect('status' in end).toBe(true);
    const status = (end as { status: grpc.ServiceError }).status;
    expect([status.code, status.details]).toEqual([grpc.status.INTERNAL, 'An error occurred during execution']);
    // Nothing more comes on it.
    await expect(st.next(500)).rejects.toThrow(/no response/);
  });

  it('test_triton_grpc_error_multithreaded: two header streams at once each end with INTERNAL at their first error', async () => {
    const run = async () => {
      const st = openStream(true);
      for (let i = 0; i < 4; i++) {
        st.send('execute_grpc_error');
        const e = await st.next();
        if ('status' in e) return e.status.code;
        expect(e.data.error_message).toBe('');
      }
      return 'no error';
    };
    expect(await Promise.all([run(), run()])).toEqual([grpc.status.INTERNAL, grpc.status.INTERNAL]);
  });

  it("with the header, a request the engine refuses ends the stream with that error's status (INVALID_ARGUMENT)", async () => {
    const st = openStream(true);
    st.call.write({
      model_name: 'execute_grpc_error',
      inputs: [{ name: 'NOPE', datatype: 'FP32', shape: [1, 1] }],
      raw_input_contents: [f32Bytes([1])],
    });
    const end = await st.next();
    expect('status' in end && end.status.code).toBe(grpc.status.INVALID_ARGUMENT);
  });
});
