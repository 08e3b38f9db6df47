// Bad inference requests on the real engine, over gRPC and HTTP: Triton's
// codes (INVALID_ARG -> gRPC INVALID_ARGUMENT / HTTP 400, NOT_FOUND -> 404)
// with messages naming the tensor or model at fault; the engine stays up.
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import {
  encodeBytesTensor,
  f32Bytes,
  grpcError,
  httpJson,
  i32Bytes,
  protoLoaderClient,
  removeDir,
  startTestEngine,
  tempRepo,
  toI32,
  type ProtoClient,
} from './helpers.ts';

let repo: string;
let engine: RunningEngine;
let client: ProtoClient;

const A = Array.from({ length: 16 }, (_, i) => 3 * i - 20);
const B = Array.from({ length: 16 }, (_, i) => i * i);

type In = { name: string; datatype: string; shape: number[]; bytes: Buffer };
const good = (): In[] => [
  { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], bytes: i32Bytes(A) },
  { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], bytes: i32Bytes(B) },
];

function grpcInfer(model: string, inputs: In[], outputs: string[] = []) {
  return client.call('ModelInfer', {
    model_name: model,
    inputs: inputs.map(({ name, datatype, shape }) => ({ name, datatype, shape })),
    outputs: outputs.map((name) => ({ name })),
    raw_input_contents: inputs.map((i) => i.bytes),
  });
}

/** HTTP infer with the binary extension, so wrong byte sizes reach the engine as sent. */
async function httpInfer(model: string, inputs: In[], outputs: string[] = []): Promise<{ status: number; json: any }> {
  const header = Buffer.from(
    JSON.stringify({
      inputs: inputs.map(({ name, datatype, shape, bytes }) => ({ name, datatype, shape, parameters: { binary_data_size: bytes.length } })),
      ...(outputs.length ? { outputs: outputs.map((name) => ({ name, parameters: { binary_data: false } })) } : {}),
    }),
  );
  const r = await fetch(`http://127.0.0.1:${engine.httpPort}/v2/models/${model}/infer`, {
    method: 'POST',
    headers: { 'Inference-Header-Content-Length': String(header.length), 'Content-Type': 'application/octet-stream' },
    body: Buffer.concat([header, ...inputs.map((i) => i.bytes)]),
  });
  return { status: r.status, json: JSON.parse(await r.text()) };
}

/** The same bad request over both protocols: expected codes, and every mention in both messages. */
async function expectRejected(
  model: string,
  inputs: In[],
  grpcCode: grpc.status,
  httpStatus: number,
  mentions: string[],
  outputs: string[] = [],
) {
  const g = await grpcError(grpcInfer(model, inputs, outputs));
  expect(g.code).toBe(grpcCode);
  const h = await httpInfer(model, inputs, outputs);
  expect(h.status).toBe(httpStatus);
  expect(typeof h.json.error).toBe('string');
  for (const m of mentions) {
    expect(g.details).toContain(m);
    expect(h.json.error).toContain(m);
  }
}

/** A good request answers correctly: the engine is still up and serving. */
async function expectStillServing(): Promise<void> {
  const res = await grpcInfer('simple', good());
  expect([...toI32(res.raw_output_contents[0])]).toEqual(A.map((a, i) => a + B[i]!));
  const h = await httpInfer('simple', good(), ['OUTPUT1']);
  expect(h.status).toBe(200);
  expect(h.json.outputs[0].data).toEqual(A.map((a, i) => a - B[i]!));
  expect((await client.call('ServerLive', {})).live).toBe(true);
}

beforeAll(async () => {
  repo = tempRepo('l0-infer-errors', ['simple', 'identity_bytes', 'js_echo']);
  engine = await startTestEngine({ modelRepository: repo });
  client = protoLoaderClient(engine.grpcPort);
});

afterAll(async () => {
  client?.close();
  await engine?.stop();
  removeDir(repo);
});

describe('L0_infer_errors', () => {
  it('rejects a wrong datatype naming the input', async () => {
    const inputs = good();
    inputs[1] = { ...inputs[1]!, datatype: 'FP32', bytes: f32Bytes(B) };
    await expectRejected('simple', inputs, grpc.status.INVALID_ARGUMENT, 400, ['INPUT1', 'FP32', 'INT32']);
    await expectStillServing();
  });

  it('rejects a wrong shape naming the input', async () => {
    const inputs = good();
    inputs[0] = { ...inputs[0]!, shape: [1, 15], bytes: i32Bytes(A.slice(0, 15)) };
    await expectRejected('simple', inputs, grpc.status.INVALID_ARGUMENT, 400, ['INPUT0', 'shape']);
    const rank = good();
    rank[0] = { ...rank[0]!, shape: [16] };
    await expectRejected('simple', rank, grpc.status.INVALID_ARGUMENT, 400, ['INPUT0']);
    await expectStillServing();
  });

  it('rejects a byte size that does not match the shape, naming the input', async () => {
    const inputs = good();
    inputs[0] = { ...inputs[0]!, bytes: i32Bytes(A).subarray(0, 60) };
    await expectRejected('simple', inputs, grpc.status.INVALID_ARGUMENT, 400, ['INPUT0', '64', '60']);
    await expectStillServing();
  });

  it('rejects a batch above max_batch_size, unknown and missing inputs, unknown outputs', async () => {
    const big = good().map((t) => ({ ...t, shape: [9, 16], bytes: Buffer.concat(Array(9).fill(t.bytes)) }));
    await expectRejected('simple', big, grpc.status.INVALID_ARGUMENT, 400, ['batch', '8']);
    const renamed = good();
    renamed[1] = { ...renamed[1]!, name: 'INPUT9' };
    await expectRejected('simple', renamed, grpc.status.INVALID_ARGUMENT, 400, ['INPUT9']);
    await expectRejected('simple', good().slice(0, 1), grpc.status.INVALID_ARGUMENT, 400, ['INPUT1']);
    await expectRejected('simple', good(), grpc.status.INVALID_ARGUMENT, 400, ['OUTPUT7'], ['OUTPUT7']);
    await expectStillServing();
  });

  it('rejects BYTES whose element count does not match the shape', async () => {
    const inputs: In[] = [{ name: 'INPUT0', datatype: 'BYTES', shape: [3], bytes: encodeBytesTensor(['a', 'b']) }];
    await expectRejected('identity_bytes', inputs, grpc.status.INVALID_ARGUMENT, 400, ['INPUT0']);
    // A length prefix running past the end of the tensor.
    const cut = encodeBytesTensor(['abcdef']).subarray(0, 7);
    await expectRejected('identity_bytes', [{ ...inputs[0]!, shape: [1], bytes: cut }], grpc.status.INVALID_ARGUMENT, 400, ['INPUT0']);
    await expectStillServing();
  });

  it('answers NOT_FOUND / 404 for an unknown model, naming it', async () => {
    await expectRejected('no_such_model', good(), grpc.status.NOT_FOUND, 404, ['no_such_model']);
    const meta = await httpJson(engine.httpPort, 'GET', '/v2/models/no_such_model');
    expect(meta.status).toBe(404);
    expect(meta.json.error).toContain('no_such_model');
    await expectStillServing();
  });

  it('passes a backend error through with its code and message', async () => {
    const err = await grpcError(
      client.call('ModelInfer', {
        model_name: 'js_echo',
        parameters: { fail: { string_param: 'refused by the model' } },
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [2] }],
        raw_input_contents: [f32Bytes([1, 2])],
      }),
    );
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err.details).toContain('refused by the model');
    await expectStillServing();
  });

  it('counts failures in the model statistics', async () => {
    const fails = () => engine.server.modelStatistics('simple')[0]!.inference_stats.fail.count;
    const before = fails();
    const inputs = good();
    inputs[0] = { ...inputs[0]!, bytes: i32Bytes(A).subarray(0, 4) };
    await grpcError(grpcInfer('simple', inputs));
    expect(fails()).toBe(before + 1);
  });
});
