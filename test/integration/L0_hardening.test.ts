// Engine hardening (issue 13) on the real engine: model names cannot escape
// the repository at any entry point, an absurdly long error text cannot wedge
// an HTTP/2 connection, and JSON data nested thousands deep is a 400.
import { existsSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server.ts';
import { JS_ECHO_MODEL } from '../fixtures/test-models.ts';
import { grpcError, protoLoaderClient, removeDir, startTestEngine, tempRepo, type ProtoClient } from './helpers.ts';

const GRPC_INVALID_ARG = 3;
const GRPC_NOT_FOUND = 5;

let repo: string;
let engine: RunningEngine;
let client: ProtoClient;

beforeAll(async () => {
  repo = tempRepo('hardening', ['js_echo']);
  engine = await startTestEngine({ modelRepository: repo, controlMode: 'explicit', loadModels: ['js_echo'] });
  client = protoLoaderClient(engine.grpcPort);
}, 60_000);

afterAll(async () => {
  client?.close();
  await engine?.stop();
  removeDir(repo);
});

const ECHO_CONFIG = JSON.stringify({
  backend: 'js', max_batch_size: 0,
  input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
  output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
});

describe('model names cannot escape the repository', () => {
  it('an explicit load of ../x/<name> with a file override writes nothing and is INVALID_ARG', async () => {
    const outside = `escape-${process.pid}`;
    const name = `../${outside}/escape_model`;
    const target = path.join(os.tmpdir(), outside);
    rmSync(target, { recursive: true, force: true });
    try {
      const e = await grpcError(client.call('RepositoryModelLoad', {
        model_name: name,
        parameters: { config: { string_param: ECHO_CONFIG }, 'file:1/model.ts': { bytes_param: Buffer.from(JS_ECHO_MODEL) } },
      }));
      expect(e.code).toBe(GRPC_INVALID_ARG);
      expect(e.details).toMatch(/invalid model name/);
      expect(existsSync(target)).toBe(false);
    } finally {
      rmSync(target, { recursive: true, force: true });
    }
  });

  it('a file override path outside the model folder is refused before anything is written', async () => {
    const e = await grpcError(client.call('RepositoryModelLoad', {
      model_name: 'js_echo',
      parameters: {
        config: { string_param: ECHO_CONFIG },
        'file:1/model.ts': { bytes_param: Buffer.from(JS_ECHO_MODEL) },
        'file:1/../../escaped.ts': { bytes_param: Buffer.from('x') },
      },
    }));
    expect(e.code).toBe(GRPC_INVALID_ARG);
    expect(e.details).toMatch(/escapes the model folder/);
    // The model kept serving from the repository.
    expect((await client.call('ModelReady', { name: 'js_echo' })).ready).toBe(true);
  });

  it('every entry point refuses separators, dot names and NUL', async () => {
    for (const name of ['../js_echo', 'a/b', 'a\\b', '..', 'x\u0000y']) {
      for (const [method, req] of [
        ['RepositoryModelLoad', { model_name: name }],
        ['RepositoryModelUnload', { model_name: name }],
        ['ModelConfig', { name }],
        ['ModelMetadata', { name }],
        ['ModelStatistics', { name }],
        ['ModelInfer', { model_name: name, inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }], raw_input_contents: [Buffer.alloc(4)] }],
      ] as const) {
        const e = await grpcError(client.call(method, req));
        expect(e.code, `${method} '${JSON.stringify(name)}'`).toBe(GRPC_INVALID_ARG);
      }
    }
    const r = await fetch(`http://127.0.0.1:${engine.httpPort}/v2/repository/models/${encodeURIComponent('../js_echo')}/unload`, { method: 'POST' });
    expect(r.status).toBe(400);
  });
});

describe('one bad request cannot wedge a connection', () => {
  it('errors quoting 100,000-character names are cut short and ServerLive still answers on the same connection', async () => {
    const long = 'm'.repeat(100_000);
    const stats = await grpcError(client.call('ModelStatistics', { name: long }, 5_000));
    expect(stats.code).toBe(GRPC_INVALID_ARG);
    expect(stats.details.length).toBeLessThan(5_000);
    // A name that is no model name: the region lookup echoes it; the text is capped.
    const shm = await grpcError(client.call('SystemSharedMemoryStatus', { name: long }, 5_000));
    expect(shm.code).toBe(GRPC_NOT_FOUND);
    expect(shm.details.length).toBeLessThan(5_000);
    expect((await client.call('ServerLive', {}, 5_000)).live).toBe(true);
  });
});

describe('deep JSON', () => {
  it('data nested 20,000 deep is a 400 with a clear error', async () => {
    const depth = 20_000;
    const data = `${'['.repeat(depth)}1${']'.repeat(depth)}`;
    const body = `{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":${data}}]}`;
    const r = await fetch(`http://127.0.0.1:${engine.httpPort}/v2/models/js_echo/infer`, { method: 'POST', body, headers: { 'Content-Type': 'application/json' } });
    expect(r.status).toBe(400);
    expect(((await r.json()) as { error: string }).error).toMatch(/nested deeper than/);
    const ok = await fetch(`http://127.0.0.1:${engine.httpPort}/v2/health/live`);
    expect(ok.status).toBe(200);
  });
});
