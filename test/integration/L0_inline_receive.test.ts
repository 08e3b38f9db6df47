// Large inline tensors through the receive pool (engine/frontends/grpc/receive-pool.ts):
// many concurrent clip_encoder_model requests with distinct inputs, over gRPC
// (pooled grpc-js decoder) and HTTP (binary extension), in two rounds so the
// second runs on reused buffers. Every answer must equal a direct
// onnxruntime session on the same input: a buffer reused while a request
// still read it would show up as a wrong embedding.
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { freeCount } from '../../engine/frontends/grpc/receive-pool.ts';
import {
  f32Bytes,
  maxAbsDiff,
  protoLoaderClient,
  removeDir,
  seededFloats,
  startTestEngine,
  tempRepo,
  toF32,
  type ProtoClient,
} from './helpers.ts';

const CLIP = 'clip_encoder_model';
const PIXELS = 3 * 224 * 224;
const N = 12;

let repo: string;
let engine: RunningEngine;
let client: ProtoClient;
let inputs: Float32Array[];
let expected: Float32Array[];

async function viaHttp(x: Float32Array): Promise<Float32Array> {
  const head = Buffer.from(
    JSON.stringify({
      inputs: [{ name: 'pixel_values', datatype: 'FP32', shape: [1, 3, 224, 224], parameters: { binary_data_size: x.byteLength } }],
      parameters: { binary_data_output: true },
    }),
  );
  const res = await fetch(`http://127.0.0.1:${engine.httpPort}/v2/models/${CLIP}/infer`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': String(head.length) },
    body: Buffer.concat([head, f32Bytes(x)]),
  });
  expect(res.status).toBe(200);
  const body = Buffer.from(await res.arrayBuffer());
  return toF32(body.subarray(Number(res.headers.get('inference-header-content-length'))));
}

async function viaGrpc(x: Float32Array): Promise<Float32Array> {
  const res = await client.call<{ raw_output_contents: Buffer[] }>('ModelInfer', {
    model_name: CLIP,
    inputs: [{ name: 'pixel_values', datatype: 'FP32', shape: [1, 3, 224, 224] }],
    raw_input_contents: [f32Bytes(x)],
  });
  return toF32(res.raw_output_contents[0]!);
}

beforeAll(async () => {
  repo = tempRepo('l0-inline', [], [CLIP]);
  engine = await startTestEngine({ modelRepository: repo });
  client = protoLoaderClient(engine.grpcPort);
  const session = await ort.InferenceSession.create(path.join(repo, CLIP, '1', 'model.onnx'), { intraOpNumThreads: 1 });
  inputs = Array.from({ length: N }, (_, i) => seededFloats(PIXELS, 100 + i, -2, 2));
  expected = [];
  for (const x of inputs)
    expected.push((await session.run({ pixel_values: new ort.Tensor('float32', x, [1, 3, 224, 224]) })).image_embeds!.data as Float32Array);
  await session.release();
}, 120_000);

afterAll(async () => {
  client?.close();
  await engine?.stop();
  removeDir(repo);
});

describe('L0_inline_receive: concurrent large inline requests on reused receive buffers', () => {
  it("answers every concurrent gRPC and HTTP request with its own input's embedding, twice", async () => {
    for (let round = 0; round < 2; round++) {
      const order = inputs.map((_, i) => i).sort((a, b) => ((a * 7 + round * 5) % N) - ((b * 7 + round * 5) % N));
      const got = await Promise.all(
        order.flatMap((i) => [viaGrpc(inputs[i]!).then((y) => [i, y] as const), viaHttp(inputs[i]!).then((y) => [i, y] as const)]),
      );
      for (const [i, y] of got) expect(maxAbsDiff(y, expected[i]!), `round ${round}, input ${i}`).toBeLessThan(1e-4);
      // Replies sent, inferences settled: the bodies went back to the pool.
      expect(freeCount()).toBeGreaterThan(0);
    }
  }, 120_000);
});
