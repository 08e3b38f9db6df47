// Engine hardening (issue 13) on the real engine: model names cannot escape
// the repository at any entry point, an absurdly long error text cannot wedge
// an HTTP/2 connection, and JSON data nested thousands deep is a 400.
import { existsSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSharedMemoryRegion, destroySharedMemoryRegion, listSharedMemoryKeys } from '../../client/shared-memory.ts';
import type { InferRequest } from '../../engine/api/infer-request.ts';
import type { RunningEngine } from '../../engine/server/server.ts';
import { shmClose, shmOpen, shmTruncate, shmUnlinkIfExists } from '../../native/index.ts';
import { JS_ECHO_MODEL } from '../fixtures/test-models.ts';
import { grpcError, protoLoaderClient, removeDir, startTestEngine, tempRepo, type ProtoClient } from './helpers.ts';

const GRPC_INVALID_ARG = 3;
const GRPC_NOT_FOUND = 5;

let repo: string;
let engine: RunningEngine;
let client: ProtoClient;

beforeAll(async () => {
  repo = tempRepo('hardening', ['js_echo', 'simple_fp32_batch']);
  engine = await startTestEngine({
    modelRepository: repo,
    controlMode: 'explicit',
    loadModels: ['js_echo', 'simple_fp32_batch'],
    shmSweepMs: 100,
  });
  client = protoLoaderClient(engine.grpcPort);
}, 60_000);

afterAll(async () => {
  client?.close();
  await engine?.stop();
  removeDir(repo);
  // Regions a failed test left behind (a passing test removes its own).
  for (const k of listSharedMemoryKeys('/'))
    if (k.includes(`trunc${process.pid}_`) || k.includes(`vanish${process.pid}_`)) shmUnlinkIfExists(k);
});

const ECHO_CONFIG = JSON.stringify({
  backend: 'js',
  max_batch_size: 0,
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
      const e = await grpcError(
        client.call('RepositoryModelLoad', {
          model_name: name,
          parameters: { config: { string_param: ECHO_CONFIG }, 'file:1/model.ts': { bytes_param: Buffer.from(JS_ECHO_MODEL) } },
        }),
      );
      expect(e.code).toBe(GRPC_INVALID_ARG);
      expect(e.details).toMatch(/invalid model name/);
      expect(existsSync(target)).toBe(false);
    } finally {
      rmSync(target, { recursive: true, force: true });
    }
  });

  it('a file override path outside the model folder is refused before anything is written', async () => {
    const e = await grpcError(
      client.call('RepositoryModelLoad', {
        model_name: 'js_echo',
        parameters: {
          config: { string_param: ECHO_CONFIG },
          'file:1/model.ts': { bytes_param: Buffer.from(JS_ECHO_MODEL) },
          'file:1/../../escaped.ts': { bytes_param: Buffer.from('x') },
        },
      }),
    );
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
        [
          'ModelInfer',
          { model_name: name, inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }], raw_input_contents: [Buffer.alloc(4)] },
        ],
      ] as const) {
        const e = await grpcError(client.call(method, req));
        expect(e.code, `${method} '${JSON.stringify(name)}'`).toBe(GRPC_INVALID_ARG);
      }
    }
    const r = await fetch(`http://127.0.0.1:${engine.httpPort}/v2/repository/models/${encodeURIComponent('../js_echo')}/unload`, {
      method: 'POST',
    });
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
    const r = await fetch(`http://127.0.0.1:${engine.httpPort}/v2/models/js_echo/infer`, {
      method: 'POST',
      body,
      headers: { 'Content-Type': 'application/json' },
    });
    expect(r.status).toBe(400);
    expect(((await r.json()) as { error: string }).error).toMatch(/nested deeper than/);
    const ok = await fetch(`http://127.0.0.1:${engine.httpPort}/v2/health/live`);
    expect(ok.status).toBe(200);
  });
});

describe('a truncated shm input never becomes zeros', () => {
  let n = 0;
  /** A fresh region holding `values` (FP32), registered with the engine. */
  function region(values: number[]) {
    const name = `trunc${process.pid}_${n++}`;
    const h = createSharedMemoryRegion(name, `/${name}`, values.length * 4);
    h.bytes.set(new Uint8Array(Float32Array.from(values).buffer));
    engine.engine.shmRegister(name, h.key, 0, h.byteSize);
    return h;
  }
  function truncate(key: string): void {
    const fd = shmOpen(key);
    try {
      shmTruncate(fd, 0);
    } finally {
      shmClose(fd);
    }
  }
  const shmInput = (name: string, h: { name: string; byteSize: number }, shape: number[]) => ({
    name,
    datatype: 'FP32' as const,
    shape,
    data: new Uint8Array(0),
    shm: { region: h.name, offset: 0, byteSize: h.byteSize },
  });

  it('a js model whose input region is truncated while the request waits: INVALID_ARG, never zeros', async () => {
    for (let i = 0; i < 5; i++) {
      const h = region([1, 2, 3, 4]);
      // A slow request holds the model's one instance, so the shm request waits in the queue.
      const blocker = engine.engine.infer({
        modelName: 'js_echo',
        outputs: [],
        parameters: { delay_ms: 30 },
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1], data: new Uint8Array(4) }],
      });
      const req: InferRequest = { modelName: 'js_echo', inputs: [shmInput('INPUT0', h, [4])], outputs: [], parameters: {} };
      const p = engine.engine.infer(req).then(
        (r) => [...new Float32Array(Uint8Array.from(r.outputs[0]!.data).buffer)],
        (e: Error) => e,
      );
      truncate(h.key); // the request is queued: nothing has read the region yet
      const got = await p;
      await blocker;
      expect(got, `try ${i}`).toBeInstanceOf(Error);
      expect((got as Error).message).toMatch(/truncated|shrank/);
      engine.engine.shmUnregister(h.name);
      destroySharedMemoryRegion(h);
    }
  });

  it('a batched copy skips the truncated request and serves the rest of the batch', async () => {
    const h = region([5, 6, 7, 8]);
    const inline: InferRequest = {
      modelName: 'simple_fp32_batch',
      inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 4], data: new Uint8Array(Float32Array.from([1, 2, 3, 4]).buffer) }],
      outputs: [],
      parameters: {},
    };
    const staged: InferRequest = { modelName: 'simple_fp32_batch', inputs: [shmInput('x', h, [1, 4])], outputs: [], parameters: {} };
    const a = engine.engine.infer(inline);
    const b = engine.engine.infer(staged).then(
      () => undefined,
      (e: Error) => e,
    );
    truncate(h.key); // both wait in the batcher's queue (20 ms delay)
    const [ra, eb] = await Promise.all([a, b]);
    expect([...new Float32Array(Uint8Array.from(ra.outputs[0]!.data).buffer)]).toEqual([3, 5, 7, 9]);
    expect(eb).toBeInstanceOf(Error);
    expect((eb as Error).message).toMatch(/truncated|shrank/);
    engine.engine.shmUnregister(h.name);
    destroySharedMemoryRegion(h);
  });
});

describe('regions whose object vanished', () => {
  it('the engine unregisters a region whose key was unlinked or now names another object', async () => {
    const gone = `vanish${process.pid}_a`;
    const reused = `vanish${process.pid}_b`;
    const a = createSharedMemoryRegion(gone, `/${gone}`, 4096);
    const b = createSharedMemoryRegion(reused, `/${reused}`, 4096);
    engine.engine.shmRegister(gone, a.key, 0, 4096);
    engine.engine.shmRegister(reused, b.key, 0, 4096);
    const names = () => engine.engine.shmStatus().map((r) => r.name);
    expect(names()).toEqual(expect.arrayContaining([gone, reused]));
    shmUnlinkIfExists(a.key); // its owner was reaped while the engine kept it mapped
    shmUnlinkIfExists(b.key);
    const b2 = createSharedMemoryRegion(reused, `/${reused}`, 4096); // same key, another object
    const t0 = Date.now();
    while ((names().includes(gone) || names().includes(reused)) && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 50));
    expect(names()).not.toContain(gone);
    expect(names()).not.toContain(reused);
    destroySharedMemoryRegion(a);
    destroySharedMemoryRegion(b);
    destroySharedMemoryRegion(b2);
  });
});
