// Triton's nv_inference_request_failure{model, reason, version} (core
// metric_model_reporter.cc, infer_stats.h FailureReason), read from the real
// engine's metrics port the way L0_backend_python/lifecycle's
// _metrics_before_test and _assert_metrics read it: every reason listed
// from the model's load (0), and each failure counted under its reason:
// BACKEND (the model's own error), REJECTED (queue full, timeout in the
// queue), CANCELED (the client cancelled), OTHER (refused before the model
// ran: a request that does not fit the model's inputs).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type * as grpc from '@grpc/grpc-js';
import type { RunningEngine } from '../../engine/server/server.ts';
import { JS_ECHO_MODEL, writeModel } from '../fixtures/test-models.ts';
import { f32Bytes, grpcError, httpJson, protoLoaderClient, removeDir, startTestEngine, tempRepo, type ProtoClient } from './helpers.ts';

// js_echo behind a dynamic batcher whose queue holds one request, for 300 ms at most.
const QUEUED_CONFIG = `name: "js_queued"
backend: "js"
default_model_filename: "model.ts"
max_batch_size: 4
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
dynamic_batching {
  max_queue_delay_microseconds: 0
  default_queue_policy { max_queue_size: 1, timeout_action: REJECT, default_timeout_microseconds: 300000 }
}
`;

let repo: string;
let engine: RunningEngine;
let client: ProtoClient;

beforeAll(async () => {
  repo = tempRepo('l0-metrics-reason', ['js_echo']);
  writeModel(repo, 'js_queued', QUEUED_CONFIG, { 'model.ts': JS_ECHO_MODEL });
  engine = await startTestEngine({ modelRepository: repo });
  client = protoLoaderClient(engine.grpcPort);
});
afterAll(async () => {
  client?.close();
  await engine?.stop();
  removeDir(repo);
});

/** The counter as the QA test's regex reads it: model, reason, version in that order. */
async function failures(model: string, reason: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${engine.metricsPort}/metrics`)).text();
  const m = new RegExp(`^nv_inference_request_failure\\{model="${model}",reason="${reason}",version="1"\\} (\\d+)$`, 'm').exec(text);
  if (!m) throw new Error(`Failure metrics for model='${model}' reason='${reason}' not found`);
  return Number(m[1]);
}

const echoBody = (params: Record<string, unknown> = {}, shape = [3]) => ({
  parameters: params,
  inputs: [{ name: 'INPUT0', datatype: 'FP32', shape, data: new Array(shape.reduce((a, b) => a * b, 1)).fill(1) }],
});

describe('L0_metrics_failure_reason', () => {
  it('every reason is listed at 0 from the load', async () => {
    for (const reason of ['REJECTED', 'CANCELED', 'BACKEND', 'OTHER']) expect(await failures('js_echo', reason)).toBe(0);
  });

  it('BACKEND: the model answered the request with an error', async () => {
    const before = await failures('js_echo', 'BACKEND');
    const r = await httpJson(engine.httpPort, 'POST', '/v2/models/js_echo/infer', echoBody({ fail: 'no' }));
    expect(r.status).toBe(400);
    expect(await failures('js_echo', 'BACKEND')).toBe(before + 1);
    expect(await failures('js_echo', 'OTHER')).toBe(0);
  });

  it('OTHER: a request refused before the model ran (an input the model does not have)', async () => {
    const before = await failures('js_echo', 'OTHER');
    const r = await httpJson(engine.httpPort, 'POST', '/v2/models/js_echo/infer', {
      inputs: [{ name: 'NOPE', datatype: 'FP32', shape: [1], data: [1] }],
    });
    expect(r.status).toBe(400);
    expect(await failures('js_echo', 'OTHER')).toBe(before + 1);
  });

  it("REJECTED: the queue was full, and a queued request's timeout passed", async () => {
    const before = await failures('js_queued', 'REJECTED');
    const infer = (params: Record<string, unknown>) =>
      httpJson(engine.httpPort, 'POST', '/v2/models/js_queued/infer', echoBody(params, [1, 3]));
    const running = infer({ delay_ms: 900 }); // takes the one instance
    await new Promise((r) => setTimeout(r, 150));
    const queued = infer({}); // waits in the queue, past its 300 ms
    await new Promise((r) => setTimeout(r, 50));
    const full = await infer({}); // finds the queue full
    expect([full.status, full.json.error]).toEqual([503, "Exceeds maximum queue size for model 'js_queued'"]);
    const late = await queued;
    expect([late.status, late.json.error]).toEqual([503, 'Request timeout expired']);
    expect((await running).status).toBe(200);
    expect(await failures('js_queued', 'REJECTED')).toBe(before + 2);
    expect(await failures('js_queued', 'BACKEND')).toBe(0);
  });

  it('CANCELED: the client cancelled its call while it was queued', async () => {
    const before = await failures('js_queued', 'CANCELED');
    const running = httpJson(engine.httpPort, 'POST', '/v2/models/js_queued/infer', echoBody({ delay_ms: 600 }, [1, 3]));
    await new Promise((r) => setTimeout(r, 150));
    let call: grpc.ClientUnaryCall | undefined;
    const cancelled = grpcError(
      new Promise((resolve, reject) => {
        call = client.raw.ModelInfer(
          {
            model_name: 'js_queued',
            inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 3] }],
            raw_input_contents: [f32Bytes([1, 2, 3])],
          },
          (err: Error | null, res: unknown) => (err ? reject(err) : resolve(res)),
        );
      }),
    );
    await new Promise((r) => setTimeout(r, 100));
    call!.cancel();
    expect((await cancelled).code).toBe(1); // CANCELLED, on the client's side
    expect((await running).status).toBe(200);
    for (let i = 0; i < 50 && (await failures('js_queued', 'CANCELED')) === before; i++) await new Promise((r) => setTimeout(r, 20));
    expect(await failures('js_queued', 'CANCELED')).toBe(before + 1);
  });
});
