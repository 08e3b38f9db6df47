// The model repository at boot on the real engine: one bad model (broken
// config, missing model file) marks only itself UNAVAILABLE with a reason
// naming file:line:col and field path; every other model loads; with
// --strict-model-config=false a config without inputs/outputs is completed
// from the ONNX file, with =true it is not; version folders and policy.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { usableGpuCount } from '../../engine/config/gpu-info.ts';
import { BROKEN_MODEL_ERROR, SIMPLE_CONFIG, buildSimple, buildSimpleFp32Batch, writeBrokenModel } from '../fixtures/test-models.ts';
import {
  f32Bytes,
  grpcError,
  httpJson,
  i32Bytes,
  protoLoaderClient,
  removeDir,
  startTestEngine,
  tempRepo,
  toF32,
  toI32,
  type ProtoClient,
} from './helpers.ts';

/** Write <repo>/<name>/config.pbtxt and <repo>/<name>/<version>/<file> for each given file. */
function writeModel(repo: string, name: string, config: string, versions: Record<string, Record<string, Uint8Array>>): void {
  mkdirSync(path.join(repo, name), { recursive: true });
  writeFileSync(path.join(repo, name, 'config.pbtxt'), config);
  for (const [v, files] of Object.entries(versions)) {
    mkdirSync(path.join(repo, name, v), { recursive: true });
    for (const [f, data] of Object.entries(files)) writeFileSync(path.join(repo, name, v, f), data);
  }
}

/** A repository with good models, a broken config, a missing file, a bare config and two versions. */
function writeMixedRepository(prefix: string): string {
  const repo = tempRepo(prefix, ['simple', 'js_echo']);
  writeBrokenModel(repo);
  // Config fine, version folder present, model.onnx absent.
  writeModel(repo, 'nofile_model', SIMPLE_CONFIG.replace('name: "simple"', 'name: "nofile_model"'), { '1': {} });
  // Only a name and a platform: inputs, outputs and max_batch_size come from the ONNX file.
  writeModel(repo, 'bare_model', 'name: "bare_model"\nplatform: "onnxruntime_onnx"\n', { '1': { 'model.onnx': buildSimpleFp32Batch() } });
  // Asks for a GPU instance: on a host where onnxruntime has no usable GPU it must be refused with a reason.
  writeModel(
    repo,
    'gpu_model',
    `${SIMPLE_CONFIG.replace('name: "simple"', 'name: "gpu_model"')}instance_group [ { count: 1, kind: KIND_GPU } ]\n`,
    {
      '1': { 'model.onnx': buildSimple() },
    },
  );
  // Versions 1 and 3; the default policy (latest 1) serves only 3.
  const twoVersions = SIMPLE_CONFIG.replace('name: "simple"', 'name: "versioned_model"');
  writeModel(repo, 'versioned_model', twoVersions, { '1': { 'model.onnx': buildSimple() }, '3': { 'model.onnx': buildSimple() } });
  return repo;
}

type Row = { name: string; version: string; state: string; reason: string };

describe('L0_model_repository: mixed repository, --strict-model-config=false', () => {
  let repo: string;
  let engine: RunningEngine;
  let client: ProtoClient;
  let index: Row[];
  const row = (name: string) => index.filter((r) => r.name === name);

  beforeAll(async () => {
    repo = writeMixedRepository('l0-repo');
    engine = await startTestEngine({ modelRepository: repo, strictModelConfig: false });
    client = protoLoaderClient(engine.grpcPort);
    index = (await client.call('RepositoryIndex', { repository_name: '', ready: false })).models;
  });

  afterAll(async () => {
    client?.close();
    await engine?.stop();
    removeDir(repo);
  });

  it('loads every good model READY despite the bad ones', async () => {
    for (const name of ['simple', 'js_echo', 'bare_model']) {
      expect(row(name)).toEqual([{ name, version: '1', state: 'READY', reason: '' }]);
      expect((await client.call('ModelReady', { name, version: '' })).ready).toBe(true);
    }
    // A good model still serves.
    const A = Array.from({ length: 16 }, (_, i) => i - 3);
    const res = await client.call('ModelInfer', {
      model_name: 'simple',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16] },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
      ],
      raw_input_contents: [i32Bytes(A), i32Bytes(A)],
    });
    expect([...toI32(res.raw_output_contents[0])]).toEqual(A.map((a) => 2 * a));
  });

  it('marks the broken config UNAVAILABLE with file:line:col and the field path', async () => {
    const rows = row('broken_model');
    expect(rows).toHaveLength(1);
    expect(rows[0]!.state).toBe('UNAVAILABLE');
    // The position is the offending value's (`two`, like protoc), on the line of `count`.
    const { file, line, valueColumn, field } = BROKEN_MODEL_ERROR;
    expect(rows[0]!.reason).toContain(`${file}:${line}:${valueColumn}: ${field}`);
    expect(rows[0]!.reason).toContain(field);
    expect(rows[0]!.reason).toMatch(/two/);
    // The same index over HTTP.
    const http = await httpJson(engine.httpPort, 'POST', '/v2/repository/index', {});
    expect(http.status).toBe(200);
    expect(http.json).toContainEqual(rows[0]);
    // Not ready; inference names the model and says why.
    expect((await client.call('ModelReady', { name: 'broken_model', version: '' })).ready).toBe(false);
    const err = await grpcError(
      client.call('ModelInfer', {
        model_name: 'broken_model',
        inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 4] }],
        raw_input_contents: [f32Bytes([1, 2, 3, 4])],
      }),
    );
    expect(err.code).toBe(grpc.status.UNAVAILABLE);
    expect(err.details).toContain('broken_model');
  });

  it('marks a model whose model file is missing UNAVAILABLE with a reason', () => {
    const rows = row('nofile_model');
    expect(rows).toHaveLength(1);
    expect(rows[0]!.state).toBe('UNAVAILABLE');
    expect(rows[0]!.reason).toContain('model.onnx');
    expect(rows[0]!.reason).toContain('nofile_model');
  });

  it('refuses KIND_GPU where onnxruntime has no usable GPU, saying what is missing', () => {
    const rows = row('gpu_model');
    expect(rows).toHaveLength(1);
    if (usableGpuCount() > 0) {
      expect(rows[0]!.state).toBe('READY');
      return;
    }
    expect(rows[0]!.state).toBe('UNAVAILABLE');
    expect(rows[0]!.reason).toMatch(/gpu_model\/config\.pbtxt: instance_group\[0\]\.kind: KIND_GPU but no GPUs are available/);
    expect(rows[0]!.reason).toContain('CUDA execution provider');
  });

  it('is not ready as a server while a model is unavailable (strict readiness)', async () => {
    expect((await client.call('ServerLive', {})).live).toBe(true);
    expect((await client.call('ServerReady', {})).ready).toBe(false);
    expect((await fetch(`http://127.0.0.1:${engine.httpPort}/v2/health/ready`)).status).toBe(400);
  });

  it('auto-completes inputs, outputs and batching from the ONNX file', async () => {
    const meta = await client.call('ModelMetadata', { name: 'bare_model', version: '' });
    expect(meta.inputs).toEqual([{ name: 'x', datatype: 'FP32', shape: ['-1', '4'] }]);
    expect(meta.outputs).toEqual([{ name: 'y', datatype: 'FP32', shape: ['-1', '4'] }]);
    const { config } = await client.call('ModelConfig', { name: 'bare_model', version: '' });
    expect(config.max_batch_size).toBeGreaterThan(0);
    expect(config.input[0]).toMatchObject({ name: 'x', data_type: 'TYPE_FP32', dims: ['4'] });
    const res = await client.call('ModelInfer', {
      model_name: 'bare_model',
      inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 4] }],
      raw_input_contents: [f32Bytes([0, 1, 2, -3])],
    });
    expect([...toF32(res.raw_output_contents[0])]).toEqual([1, 3, 5, -5]);
  });

  it('serves the latest version only under the default version policy', async () => {
    expect(row('versioned_model').map((r) => [r.version, r.state])).toEqual([['3', 'READY']]);
    const meta = await client.call('ModelMetadata', { name: 'versioned_model', version: '' });
    expect(meta.versions).toEqual(['3']);
    expect((await client.call('ModelReady', { name: 'versioned_model', version: '3' })).ready).toBe(true);
    expect((await client.call('ModelReady', { name: 'versioned_model', version: '1' })).ready).toBe(false);
  });
});

describe('L0_model_repository: --strict-model-config=true', () => {
  let repo: string;
  let engine: RunningEngine;

  beforeAll(async () => {
    repo = tempRepo('l0-repo-strict', ['simple']);
    writeModel(repo, 'bare_model', 'name: "bare_model"\nplatform: "onnxruntime_onnx"\n', { '1': { 'model.onnx': buildSimpleFp32Batch() } });
    engine = await startTestEngine({ modelRepository: repo, strictModelConfig: true });
  });

  afterAll(async () => {
    await engine?.stop();
    removeDir(repo);
  });

  it('does not complete a config that lacks inputs and outputs', () => {
    const rows = engine.server.repositoryIndex(false);
    expect(rows.find((r) => r.name === 'simple')?.state).toBe('READY');
    const bare = rows.find((r) => r.name === 'bare_model');
    expect(bare?.state).toBe('UNAVAILABLE');
    expect(bare?.reason).toContain('bare_model/config.pbtxt');
  });
});
