// The wire details Triton's clients and tools check, driven the way Triton's
// model-control examples do (explicit mode, load/unload with `config` and
// file overrides): server metadata name, `failed to load '<model>'` messages,
// HttpCodeFromError status codes, backend from the model file when the
// config names none, and ensemble statistics kept as Triton keeps them.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { ENS_ECHO_CONFIG, JS_ECHO_MODEL } from '../fixtures/test-models.ts';
import {
  f32Bytes,
  grpcError,
  httpJson,
  protoLoaderClient,
  removeDir,
  startTestEngine,
  tempRepo,
  toF32,
  type ProtoClient,
} from './helpers.ts';

const GRPC_INVALID_ARG = 3;

describe('L0_model_control_overrides', () => {
  let engine: RunningEngine;
  let repo: string;
  let client: ProtoClient;
  const load = (model: string, parameters: Record<string, unknown> = {}) =>
    client.call('RepositoryModelLoad', { model_name: model, parameters });
  const stats = (name: string) => engine.server.modelStatistics(name)[0]!;

  beforeAll(async () => {
    repo = tempRepo('l0-mc-overrides', ['simple_fp32_batch', 'js_echo']);
    mkdirSync(path.join(repo, 'ens_echo', '1'), { recursive: true });
    writeFileSync(path.join(repo, 'ens_echo', 'config.pbtxt'), ENS_ECHO_CONFIG);
    engine = await startTestEngine({ modelRepository: repo, controlMode: 'explicit' });
    client = protoLoaderClient(engine.grpcPort);
  });

  afterAll(async () => {
    client?.close();
    await engine?.stop();
    removeDir(repo);
  });

  it("answers server metadata as 'triton' with our version and extensions", async () => {
    const g = await client.call('ServerMetadata', {});
    expect(g.name).toBe('triton');
    expect(g.extensions).toContain('model_repository');
    const h = await httpJson(engine.httpPort, 'GET', '/v2');
    expect([h.json.name, h.json.version]).toEqual(['triton', g.version]);
  });

  it("a failed load begins with failed to load '<model>' over gRPC and HTTP, status 400", async () => {
    const unknown = await grpcError(load('no_such_model'));
    expect([unknown.code, unknown.details.startsWith("failed to load 'no_such_model'")]).toEqual([GRPC_INVALID_ARG, true]);
    const badJson = await httpJson(engine.httpPort, 'POST', '/v2/repository/models/simple_fp32_batch/load', {
      parameters: { config: '{not json' },
    });
    expect(badJson.status).toBe(400);
    expect(badJson.json.error).toMatch(/^failed to load 'simple_fp32_batch': .*not valid JSON/);
    const badField = await grpcError(
      load('simple_fp32_batch', {
        config: { string_param: '{"max_batch_size": 4, "instance_group": [{"count": -2, "kind": "KIND_CPU"}]}' },
      }),
    );
    expect(badField.details).toMatch(/^failed to load 'simple_fp32_batch': .*instance_group\[0\]\.count/);
    const escape = await httpJson(engine.httpPort, 'POST', '/v2/repository/models/js_echo/load', {
      parameters: { config: '{"max_batch_size": 0}', 'file:../../evil.ts': Buffer.from('x').toString('base64') },
    });
    expect(escape.status).toBe(400);
    expect(escape.json.error).toMatch(/^failed to load 'js_echo': .*escapes the model folder/);
    const missing = await httpJson(engine.httpPort, 'POST', '/v2/models/no_such_model/infer', { inputs: [] });
    expect(missing.status).toBe(404);
  });

  it('a config override without backend takes it from the model file (model.onnx -> onnxruntime)', async () => {
    await load('simple_fp32_batch', { config: { string_param: '{"max_batch_size": 16}' } });
    const cfg = engine.server.modelConfig('simple_fp32_batch');
    expect([cfg.backend, cfg.platform, cfg.max_batch_size]).toEqual(['onnxruntime', 'onnxruntime_onnx', 16]);
    expect(cfg.input.map((t) => [t.name, t.dims])).toEqual([['x', [4]]]);
    const r = await client.call('ModelInfer', {
      model_name: 'simple_fp32_batch',
      inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 4] }],
      raw_input_contents: [f32Bytes([0, 1, 2, 3])],
    });
    expect(r.outputs[0].shape.map(Number)).toEqual([1, 4]);
    await client.call('RepositoryModelUnload', { model_name: 'simple_fp32_batch' });
  });

  it('a file override with model.ts and no backend loads as js', async () => {
    const config = JSON.stringify({
      max_batch_size: 0,
      input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
      output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
    });
    await load('js_echo', { config: { string_param: config }, 'file:1/model.ts': { bytes_param: Buffer.from(JS_ECHO_MODEL) } });
    expect(engine.server.modelConfig('js_echo').backend).toBe('js');
    await client.call('RepositoryModelUnload', { model_name: 'js_echo' });
  });

  it('keeps ensemble statistics as Triton does: queue, summed step compute times, batch_stats', async () => {
    await load('ens_echo');
    const N = 5;
    for (let i = 0; i < N; i++) {
      const r = await client.call('ModelInfer', {
        model_name: 'ens_echo',
        inputs: [{ name: 'X', datatype: 'FP32', shape: [2] }],
        raw_input_contents: [f32Bytes([i, 1])],
      });
      expect([...toF32(r.raw_output_contents[0])]).toEqual([i, 1]);
    }
    const ens = stats('ens_echo');
    const step = stats('js_echo');
    expect(step.inference_stats.success.count).toBe(2 * N);
    expect(ens.inference_stats.success.count).toBe(N);
    expect(ens.inference_stats.queue.count).toBe(N);
    expect(ens.inference_stats.queue.ns).toBeGreaterThan(0);
    expect([ens.inference_count, ens.execution_count]).toEqual([N, N]);
    for (const k of ['compute_input', 'compute_infer', 'compute_output'] as const) {
      expect(ens.inference_stats[k].count, k).toBe(N);
      expect(ens.inference_stats[k].ns, k).toBe(step.inference_stats[k].ns);
    }
    expect(ens.batch_stats.map((b) => [b.batch_size, b.compute_infer.count, b.compute_infer.ns])).toEqual([
      [1, N, step.inference_stats.compute_infer.ns],
    ]);
  });
});
