// A python model whose execute() never returns, on real stub processes: every
// request still gets its answer by its deadline (the `timeout` parameter:
// Triton's "Request timeout expired"; the gRPC deadline: DEADLINE_EXCEEDED
// from the server itself), an unload finishes within --exit-timeout-secs
// (the stuck stub is killed; what it held and what waited fail saying so),
// the model's execute_timeout_secs kills and restarts a stuck stub, and the
// shutdown is bounded by the exit timeout too. The cases between the first
// (which leaves `hang` stuck) and the last (the shutdown) each use a model of
// their own and run at the same time.
import http2 from 'node:http2';
import { describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { grpcError, httpJson, i32Bytes, toI32, type ProtoClient } from './helpers.ts';
import { processAlive, pythonRepo, pythonEngine } from './python-support.ts';
import type { RunningEngine } from '../../engine/server/server.ts';
import type { PythonInstance } from '../../engine/backends/python/python-instance.ts';

/** X == 1: execute never returns; otherwise Y = X. */
const hangModel = (name: string, params = '') => ({
  config: `name: "${name}"
backend: "python"
input [ { name: "X", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "Y", data_type: TYPE_INT32, dims: [ 1 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
${params}`,
  model: `import time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        x = int(pb_utils.get_input_tensor_by_name(requests[0], "X").as_numpy()[0])
        while x == 1:
            time.sleep(0.05)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.array([x], dtype=np.int32))]) for _ in requests]
`,
});

/** Decoupled: OUT = 0 at once, OUT = 1 after 1.5 s, then final. */
const SLOW_STREAM = {
  config: `name: "slow_stream"
backend: "python"
model_transaction_policy { decoupled: true }
input [ { name: "IN", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "OUT", data_type: TYPE_INT32, dims: [ 1 ] } ]
`,
  model: `import threading, time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for r in requests:
            threading.Thread(target=self.stream, args=(r.get_response_sender(),)).start()
        return None

    def stream(self, s):
        s.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([0], dtype=np.int32))]))
        time.sleep(1.5)
        s.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([1], dtype=np.int32))]))
        s.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
`,
};

const EXIT_TIMEOUT_SECS = 1;
let eng: RunningEngine;
let client: ProtoClient;

pythonEngine(
  () =>
    pythonRepo('l0-py-hung', [], {
      hang: hangModel('hang'),
      hang_unload: hangModel('hang_unload'),
      hang_limited: hangModel('hang_limited', 'parameters { key: "execute_timeout_secs" value: { string_value: "1" } }'),
      slow_stream: SLOW_STREAM,
    }),
  (s) => ({ eng, client } = s),
  { controlMode: 'explicit', loadModels: ['*'], exitTimeoutSecs: EXIT_TIMEOUT_SECS },
);

const stub = (model: string) => eng.engine.repository.readyVersion(model)?.backend.instances[0] as unknown as PythonInstance | undefined;
const httpInfer = (model: string, x: number, parameters?: Record<string, unknown>) =>
  httpJson(eng.httpPort, 'POST', `/v2/models/${model}/infer`, {
    inputs: [{ name: 'X', datatype: 'INT32', shape: [1], data: [x] }],
    ...(parameters ? { parameters } : {}),
  });
const grpcInfer = (model: string, x: number, parameters: Record<string, unknown> = {}, deadlineMs?: number) =>
  client.call(
    'ModelInfer',
    { model_name: model, inputs: [{ name: 'X', datatype: 'INT32', shape: [1] }], raw_input_contents: [i32Bytes([x])], parameters },
    deadlineMs,
  );
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function timed<T>(p: Promise<T>): Promise<{ value: T; ms: number }> {
  const t0 = performance.now();
  const value = await p;
  return { value, ms: performance.now() - t0 };
}

/** A raw HTTP/2 ModelInfer with a grpc-timeout header and no deadline of the client's own: what the server answers. */
function rawModelInfer(
  port: number,
  msg: Record<string, unknown>,
  grpcTimeout: string,
): Promise<{ status: string | undefined; message: string | undefined }> {
  const serialize = (client.raw.constructor as unknown as { service: Record<string, { requestSerialize(m: unknown): Buffer }> }).service
    .ModelInfer!.requestSerialize;
  const body = serialize(msg);
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(body.length, 1);
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on('error', reject);
    const req = session.request({
      ':method': 'POST',
      ':path': '/inference.GRPCInferenceService/ModelInfer',
      'content-type': 'application/grpc',
      te: 'trailers',
      'grpc-timeout': grpcTimeout,
    });
    let status: string | undefined;
    let message: string | undefined;
    const take = (h: http2.IncomingHttpHeaders) => {
      if (h['grpc-status'] !== undefined) status = String(h['grpc-status']);
      if (h['grpc-message'] !== undefined) message = decodeURIComponent(String(h['grpc-message']));
    };
    req.on('response', take);
    req.on('trailers', take);
    req.on('data', () => undefined);
    req.on('close', () => {
      session.close();
      resolve({ status, message });
    });
    req.end(Buffer.concat([prefix, body]));
  });
}

describe('L0_python_hung_execute', () => {
  it("a request's timeout parameter answers it by then, stuck instance or not (HTTP and gRPC)", async () => {
    // Executing forever, with a 0.5 s timeout: answered at 0.5 s.
    const stuck = await timed(httpInfer('hang', 1, { timeout: 500_000 }));
    expect(stuck.value.status).toBe(503);
    expect(stuck.value.json.error).toBe('Request timeout expired');
    expect(stuck.ms).toBeGreaterThan(400);
    expect(stuck.ms).toBeLessThan(3000);
    // Queued behind the stuck execute, over gRPC.
    const queued = await timed(grpcError(grpcInfer('hang', 2, { timeout: { int64_param: 300_000 } })));
    expect(queued.value).toEqual({ code: grpc.status.UNAVAILABLE, details: 'Request timeout expired' });
    expect(queued.ms).toBeLessThan(3000);
  });

  it.concurrent('the gRPC deadline: the server itself answers DEADLINE_EXCEEDED when grpc-timeout passes', async ({ expect }) => {
    const msg = { model_name: 'hang', inputs: [{ name: 'X', datatype: 'INT32', shape: [1] }], raw_input_contents: [i32Bytes([3])] };
    const r = await timed(rawModelInfer(eng.grpcPort, msg, '500m'));
    expect(r.value).toEqual({ status: String(grpc.status.DEADLINE_EXCEEDED), message: 'Deadline exceeded' });
    expect(r.ms).toBeLessThan(3000);
  });

  it.concurrent('a streamed request past its timeout gets the error, and no response after it', async ({ expect }) => {
    const got: Array<number | string> = [];
    await new Promise<void>((resolve, reject) => {
      const call = client.raw.ModelStreamInfer() as grpc.ClientDuplexStream<
        unknown,
        { error_message: string; infer_response: { raw_output_contents: Buffer[] } }
      >;
      call.on('data', (m) => got.push(m.error_message || toI32(m.infer_response.raw_output_contents[0]!)[0]!));
      call.on('error', reject);
      call.on('end', resolve);
      call.write({
        model_name: 'slow_stream',
        inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }],
        raw_input_contents: [i32Bytes([1])],
        parameters: { timeout: { int64_param: 500_000 } },
      });
      // The stream stays open while the model sends its late response.
      setTimeout(() => call.end(), 2000);
    });
    expect(got).toEqual([0, 'Request timeout expired']);
    expect(await client.call('ServerLive', {})).toEqual({ live: true });
  });

  it.concurrent('unload finishes within --exit-timeout-secs: the stuck stub is killed, the requests it held and queued fail saying so; load again serves', async ({
    expect,
  }) => {
    const pid = stub('hang_unload')!.pid!;
    const executing = httpInfer('hang_unload', 1);
    await sleep(300);
    const queued = httpInfer('hang_unload', 2);
    await sleep(100);
    const unload = await timed(httpJson(eng.httpPort, 'POST', '/v2/repository/models/hang_unload/unload'));
    expect(unload.value.status).toBe(200);
    expect(unload.ms).toBeGreaterThan(EXIT_TIMEOUT_SECS * 1000 - 100);
    expect(unload.ms).toBeLessThan(EXIT_TIMEOUT_SECS * 1000 + 4000);
    const [e1, e2] = await Promise.all([executing, queued]);
    expect(e1.status).toBe(503);
    expect(e1.json.error).toBe(
      "model 'hang_unload' was unloaded while this request was executing on instance hang_unload_0_0: its python stub was still running after the exit timeout and was killed",
    );
    expect(e2.status).toBe(503);
    expect(e2.json.error).toBe("model 'hang_unload' was unloaded before this request ran");
    expect(processAlive(pid)).toBe(false);
    expect((await httpJson(eng.httpPort, 'POST', '/v2/repository/models/hang_unload/load')).status).toBe(200);
    const ok = await httpInfer('hang_unload', 9);
    expect(ok.json.outputs[0].data).toEqual([9]);
  });

  it.concurrent('execute_timeout_secs: a stub stuck past it is killed and started again; the request fails naming model and limit', async ({
    expect,
  }) => {
    const pid = stub('hang_limited')!.pid!;
    const stuck = await timed(grpcError(grpcInfer('hang_limited', 1)));
    expect(stuck.value.code).toBe(grpc.status.UNAVAILABLE);
    expect(stuck.value.details).toBe(
      "python model 'hang_limited' instance hang_limited_0_0: execute did not return within execute_timeout_secs=1; its stub was killed and is starting again",
    );
    expect(stuck.ms).toBeGreaterThan(900);
    expect(stuck.ms).toBeLessThan(4000);
    expect(processAlive(pid)).toBe(false);
    // Started again without waiting for a request.
    for (const until = Date.now() + 10_000; !stub('hang_limited')!.pid && Date.now() < until; ) await sleep(50);
    expect(stub('hang_limited')!.pid).toBeGreaterThan(0);
    expect(stub('hang_limited')!.pid).not.toBe(pid);
    const ok = await grpcInfer('hang_limited', 5);
    expect(Array.from(toI32(ok.raw_output_contents[0]))).toEqual([5]);
  });

  it.concurrent('a bad execute_timeout_secs fails the load naming the parameter', async ({ expect }) => {
    const bad = hangModel('hang_bad', 'parameters { key: "execute_timeout_secs" value: { string_value: "soon" } }');
    const r = await httpJson(eng.httpPort, 'POST', '/v2/repository/models/hang_bad/load', {
      parameters: {
        config: JSON.stringify({
          name: 'hang_bad',
          backend: 'python',
          input: [{ name: 'X', data_type: 'TYPE_INT32', dims: [1] }],
          output: [{ name: 'Y', data_type: 'TYPE_INT32', dims: [1] }],
          parameters: { execute_timeout_secs: { string_value: 'soon' } },
        }),
        'file:1/model.py': Buffer.from(bad.model).toString('base64'),
      },
    });
    expect(r.status).toBe(400);
    expect(r.json.error).toContain("parameter execute_timeout_secs must be a number of seconds above 0 (at most 86400), got 'soon'");
  });

  it('shutdown is bounded by the exit timeout with a stub stuck in execute', async () => {
    const pid = stub('hang')!.pid!; // still executing the first test's request
    expect(processAlive(pid)).toBe(true);
    const stopped = await timed(eng.stop());
    expect(stopped.ms).toBeLessThan(EXIT_TIMEOUT_SECS * 1000 + 6000);
    expect(processAlive(pid)).toBe(false);
  });
});
