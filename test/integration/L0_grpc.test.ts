// The KServe v2 gRPC frontend on the real engine, seen through a client built
// only from the .proto files (@grpc/proto-loader, like a generated Triton
// client): health, metadata, repository index, config (same as HTTP), and
// clip_encoder_model inference over gRPC and HTTP (JSON and binary) checked
// against a direct onnxruntime-node session on the same model file.
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { messageType } from '../../protocol/index.ts';
import {
  decodeBytesTensor,
  encodeBytesTensor,
  f32Bytes,
  grpcError,
  httpJson,
  i32Bytes,
  maxAbsDiff,
  protoLoaderClient,
  removeDir,
  seededFloats,
  startTestEngine,
  tempRepo,
  toF32,
  toI32,
  type ProtoClient,
} from './helpers.ts';

const CLIP = 'clip_encoder_model';
const PIXELS = 3 * 224 * 224;
const EMBED = 512;

let repo: string;
let engine: RunningEngine;
let client: ProtoClient;
let reference: ort.InferenceSession;

/** n images of seeded pixels, flattened. */
const images = (n: number, seed: number) => seededFloats(n * PIXELS, seed, -2, 2);

async function referenceEmbeds(pixels: Float32Array, n: number): Promise<Float32Array> {
  const out = await reference.run({ pixel_values: new ort.Tensor('float32', pixels, [n, 3, 224, 224]) });
  return out.image_embeds!.data as Float32Array;
}

async function grpcClip(pixels: Float32Array, n: number): Promise<Float32Array> {
  const res = await client.call('ModelInfer', {
    model_name: CLIP,
    inputs: [{ name: 'pixel_values', datatype: 'FP32', shape: [n, 3, 224, 224] }],
    raw_input_contents: [f32Bytes(pixels)],
  });
  expect(res.outputs).toHaveLength(1);
  expect(res.outputs[0].name).toBe('image_embeds');
  expect(res.outputs[0].datatype).toBe('FP32');
  expect(res.outputs[0].shape).toEqual([String(n), String(EMBED)]);
  return toF32(res.raw_output_contents[0]);
}

beforeAll(async () => {
  repo = tempRepo('l0-grpc', ['simple', 'identity_bytes'], [CLIP]);
  engine = await startTestEngine({ modelRepository: repo });
  client = protoLoaderClient(engine.grpcPort);
  reference = await ort.InferenceSession.create(path.join(repo, CLIP, '1', 'model.onnx'), { intraOpNumThreads: 1 });
});

afterAll(async () => {
  client?.close();
  await reference?.release();
  await engine?.stop();
  removeDir(repo);
});

describe('L0_grpc: health and metadata', () => {
  it('answers live, ready, model ready and grpc.health.v1', async () => {
    expect(await client.call('ServerLive', {})).toEqual({ live: true });
    expect(await client.call('ServerReady', {})).toEqual({ ready: true });
    expect(await client.call('ModelReady', { name: CLIP, version: '' })).toEqual({ ready: true });
    expect(await client.call('ModelReady', { name: CLIP, version: '1' })).toEqual({ ready: true });
    expect(await client.call('ModelReady', { name: 'no_such_model', version: '' })).toEqual({ ready: false });
    expect((await client.health()).status).toBe('SERVING');
  });

  it('serves server metadata equal to HTTP /v2', async () => {
    const meta = await client.call('ServerMetadata', {});
    expect(meta.name).toBe(engine.server.name);
    expect(meta.version).toMatch(/\S/);
    expect(meta.extensions).toEqual(expect.arrayContaining(['model_repository', 'system_shared_memory', 'statistics']));
    const http = await httpJson(engine.httpPort, 'GET', '/v2');
    expect(http.status).toBe(200);
    expect(http.json).toEqual({ name: meta.name, version: meta.version, extensions: meta.extensions });
  });

  it('lists the repository index with states', async () => {
    const { models } = await client.call('RepositoryIndex', { repository_name: '', ready: false });
    const rows = models.map((m: any) => [m.name, m.version, m.state, m.reason]).sort();
    expect(rows).toEqual([
      [CLIP, '1', 'READY', ''],
      ['identity_bytes', '1', 'READY', ''],
      ['simple', '1', 'READY', ''],
    ]);
  });

  it('serves model metadata with the batch dimension', async () => {
    const meta = await client.call('ModelMetadata', { name: CLIP, version: '' });
    expect(meta).toEqual({
      name: CLIP,
      versions: ['1'],
      platform: 'onnxruntime_onnx',
      inputs: [{ name: 'pixel_values', datatype: 'FP32', shape: ['-1', '3', '224', '224'] }],
      outputs: [{ name: 'image_embeds', datatype: 'FP32', shape: ['-1', '512'] }],
    });
    const err = await grpcError(client.call('ModelMetadata', { name: 'no_such_model', version: '' }));
    expect(err.code).toBe(grpc.status.NOT_FOUND);
    expect(err.details).toContain('no_such_model');
  });

  it('serves the same ModelConfig over gRPC as HTTP /config', async () => {
    const { config } = await client.call('ModelConfig', { name: CLIP, version: '' });
    expect(config.name).toBe(CLIP);
    expect(config.max_batch_size).toBe(16);
    expect(config.input[0].dims).toEqual(['3', '224', '224']);
    expect(config.input[0].data_type).toBe('TYPE_FP32');
    expect(config.instance_group[0].count).toBe(2);
    expect(config.dynamic_batching.preferred_batch_size).toEqual([4, 8, 16]);
    const http = await httpJson(engine.httpPort, 'GET', `/v2/models/${CLIP}/config`);
    expect(http.status).toBe(200);
    // Both through one proto normalization: same message, field for field.
    const T = messageType('inference.ModelConfig');
    const norm = (o: object) => T.toObject(T.fromObject(o), { longs: String, enums: String, defaults: true, arrays: true, objects: true });
    expect(norm(http.json)).toEqual(norm(config));
    expect(http.json.dynamic_batching.max_queue_delay_microseconds).toBe(2000);
  });
});

describe('L0_grpc: LogSettings', () => {
  it('reads each value by its oneof field, uint32 included (log_verbose_level), and answers in kind', async () => {
    type Setting = { bool_param?: boolean; uint32_param?: number; string_param?: string };
    const before = (await client.call<{ settings: Record<string, Setting> }>('LogSettings', {})).settings;
    expect(typeof before.log_verbose_level?.uint32_param).toBe('number');
    try {
      const set = await client.call<{ settings: Record<string, Setting> }>('LogSettings', {
        settings: { log_verbose_level: { uint32_param: 2 }, log_info: { bool_param: before.log_info?.bool_param ?? true } },
      });
      expect(set.settings.log_verbose_level?.uint32_param).toBe(2);
      const wrong = await grpcError(client.call('LogSettings', { settings: { log_info: { uint32_param: 1 } } }));
      expect([wrong.code, wrong.details]).toEqual([
        grpc.status.INVALID_ARGUMENT,
        expect.stringMatching(/boolean.*'log_info'|'log_info'.*boolean/),
      ]);
    } finally {
      await client.call('LogSettings', { settings: { log_verbose_level: { uint32_param: before.log_verbose_level?.uint32_param ?? 0 } } });
    }
  });
});

describe('L0_grpc: clip_encoder_model inference', () => {
  it('matches a direct onnxruntime session over gRPC raw_input_contents', async () => {
    const px = images(1, 11);
    const got = await grpcClip(px, 1);
    const want = await referenceEmbeds(px, 1);
    expect(got).toHaveLength(EMBED);
    expect(maxAbsDiff(got, want)).toBeLessThan(1e-5);
    const norm = Math.hypot(...got);
    expect(norm).toBeCloseTo(1, 4);
  });

  it('a batch of 4 equals four single calls', async () => {
    const px = images(4, 23);
    const batch = await grpcClip(px, 4);
    const singles = await Promise.all([0, 1, 2, 3].map((i) => grpcClip(px.subarray(i * PIXELS, (i + 1) * PIXELS), 1)));
    for (let i = 0; i < 4; i++) {
      expect(maxAbsDiff(batch.subarray(i * EMBED, (i + 1) * EMBED), singles[i]!)).toBeLessThan(1e-5);
    }
    // Rows are distinct images, not one row repeated.
    expect(maxAbsDiff(singles[0]!, singles[1]!)).toBeGreaterThan(1e-3);
    expect(maxAbsDiff(batch, await referenceEmbeds(px, 4))).toBeLessThan(1e-5);
  });

  it('matches over HTTP JSON', async () => {
    const px = images(1, 37);
    const r = await httpJson(engine.httpPort, 'POST', `/v2/models/${CLIP}/infer`, {
      id: 'json-1',
      inputs: [{ name: 'pixel_values', datatype: 'FP32', shape: [1, 3, 224, 224], data: Array.from(px) }],
    });
    expect(r.status).toBe(200);
    expect(r.json.id).toBe('json-1');
    const out = r.json.outputs[0];
    expect([out.name, out.datatype, out.shape]).toEqual(['image_embeds', 'FP32', [1, EMBED]]);
    expect(maxAbsDiff(out.data, await referenceEmbeds(px, 1))).toBeLessThan(1e-5);
  });

  it('matches over HTTP with the binary tensor extension (2 images)', async () => {
    const px = images(2, 41);
    const header = Buffer.from(
      JSON.stringify({
        inputs: [{ name: 'pixel_values', datatype: 'FP32', shape: [2, 3, 224, 224], parameters: { binary_data_size: px.byteLength } }],
        outputs: [{ name: 'image_embeds', parameters: { binary_data: true } }],
      }),
    );
    const res = await fetch(`http://127.0.0.1:${engine.httpPort}/v2/models/${CLIP}/infer`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': String(header.length) },
      body: Buffer.concat([header, f32Bytes(px)]),
    });
    expect(res.status).toBe(200);
    const hlen = Number(res.headers.get('inference-header-content-length'));
    const body = Buffer.from(await res.arrayBuffer());
    const json = JSON.parse(body.subarray(0, hlen).toString());
    const out = json.outputs[0];
    expect(out.shape).toEqual([2, EMBED]);
    expect(out.parameters.binary_data_size).toBe(2 * EMBED * 4);
    const got = toF32(body.subarray(hlen, hlen + out.parameters.binary_data_size));
    expect(maxAbsDiff(got, await referenceEmbeds(px, 2))).toBeLessThan(1e-5);
  });
});

describe('L0_grpc: tensors on the wire', () => {
  const A = Array.from({ length: 16 }, (_, i) => i * 5 - 40);
  const B = Array.from({ length: 16 }, (_, i) => 7 - i * i);
  const simpleInputs = [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16] },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
  ];

  it('typed contents infer on simple, id echoed', async () => {
    const res = await client.call('ModelInfer', {
      model_name: 'simple',
      id: 'typed-42',
      inputs: [
        { ...simpleInputs[0], contents: { int_contents: A } },
        { ...simpleInputs[1], contents: { int_contents: B } },
      ],
    });
    expect(res.id).toBe('typed-42');
    expect(res.model_name).toBe('simple');
    expect(res.model_version).toBe('1');
    const byName = Object.fromEntries(res.outputs.map((o: any, i: number) => [o.name, toI32(res.raw_output_contents[i])]));
    expect([...byName.OUTPUT0]).toEqual(A.map((a, i) => a + B[i]!));
    expect([...byName.OUTPUT1]).toEqual(A.map((a, i) => a - B[i]!));
  });

  it('returns only the requested output subset', async () => {
    const res = await client.call('ModelInfer', {
      model_name: 'simple',
      inputs: simpleInputs,
      outputs: [{ name: 'OUTPUT1' }],
      raw_input_contents: [i32Bytes(A), i32Bytes(B)],
    });
    expect(res.outputs.map((o: any) => o.name)).toEqual(['OUTPUT1']);
    expect(res.raw_output_contents).toHaveLength(1);
    expect([...toI32(res.raw_output_contents[0])]).toEqual(A.map((a, i) => a - B[i]!));
  });

  it('rejects raw_input_contents mixed with typed contents', async () => {
    const err = await grpcError(
      client.call('ModelInfer', {
        model_name: 'simple',
        inputs: [{ ...simpleInputs[0], contents: { int_contents: A } }, simpleInputs[1]],
        raw_input_contents: [i32Bytes(B)],
      }),
    );
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err.details).toContain('INPUT0');
  });

  it('carries BYTES both raw (length-prefixed) and as bytes_contents', async () => {
    const items = ['hello', '', 'ünïcødé ✓', 'x'.repeat(300)];
    const raw = await client.call('ModelInfer', {
      model_name: 'identity_bytes',
      inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [items.length] }],
      raw_input_contents: [encodeBytesTensor(items)],
    });
    expect(raw.outputs[0]).toMatchObject({ name: 'OUTPUT0', datatype: 'BYTES', shape: [String(items.length)] });
    expect(decodeBytesTensor(raw.raw_output_contents[0]).map((b) => b.toString())).toEqual(items);
    const typed = await client.call('ModelInfer', {
      model_name: 'identity_bytes',
      inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [2], contents: { bytes_contents: [Buffer.from('ab'), Buffer.from('çd')] } }],
    });
    // (ONNX string tensors are UTF-8 text in onnxruntime-node: arbitrary binary does not round-trip.)
    expect(decodeBytesTensor(typed.raw_output_contents[0]).map((b) => b.toString())).toEqual(['ab', 'çd']);
  });

  it('streams inferences over ModelStreamInfer, errors in-band', async () => {
    const stream = client.raw.ModelStreamInfer();
    const replies: any[] = [];
    const done = new Promise<void>((resolve, reject) => {
      stream.on('data', (m: any) => replies.push(m));
      stream.on('end', resolve);
      stream.on('error', reject);
    });
    stream.write({ model_name: 'simple', id: 's1', inputs: simpleInputs, raw_input_contents: [i32Bytes(A), i32Bytes(B)] });
    stream.write({ model_name: 'no_such_model', id: 's2', inputs: simpleInputs, raw_input_contents: [i32Bytes(A), i32Bytes(B)] });
    stream.end();
    await done;
    expect(replies).toHaveLength(2);
    const ok = replies.find((r) => r.infer_response?.id === 's1');
    expect(ok.error_message).toBe('');
    expect([...toI32(ok.infer_response.raw_output_contents[0])]).toEqual(A.map((a, i) => a + B[i]!));
    const bad = replies.find((r) => r.error_message !== '');
    expect(bad.error_message).toContain('no_such_model');
  });
});
