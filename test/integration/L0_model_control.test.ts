// Model control on the real engine. Explicit mode: --load-model subset at
// start, RepositoryModelLoad/Unload over gRPC and HTTP, the `config` override
// and file overrides, unload_dependents, unload and reload with requests in
// flight, model_warmup before READY. Poll mode: a changed config or model file
// reloads under a client loop with no failed request, and a broken reload
// keeps the old version serving. The two modes, each on its own engine, run
// at the same time (their cases one after the other): poll mode waits on its
// 1 s poll timer, the explicit-mode cases assert only lower time bounds.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TritonGrpcClient, type ModelInferResponse, type Parameters } from '../../client/grpc-client.ts';
import type { RunningEngine } from '../../engine/server/server.ts';
import { JS_ECHO_MODEL } from '../fixtures/test-models.ts';
import { f32Bytes, grpcError, httpJson, removeDir, startTestEngine, tempRepo, toF32 } from './helpers.ts';

const GRPC_INVALID_ARG = 3;
const GRPC_UNAVAILABLE = 14;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function writeModel(repo: string, name: string, config: string, files: Record<string, string | Uint8Array> = {}, version = 1): void {
  mkdirSync(path.join(repo, name, String(version)), { recursive: true });
  writeFileSync(path.join(repo, name, 'config.pbtxt'), config);
  for (const [f, data] of Object.entries(files)) writeFileSync(path.join(repo, name, String(version), f), data);
}

const ENS_ECHO = `name: "ens_echo"
platform: "ensemble"
max_batch_size: 0
input [ { name: "X", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "Y", data_type: TYPE_FP32, dims: [ -1 ] } ]
ensemble_scheduling { step [ { model_name: "js_echo" model_version: -1 input_map { key: "INPUT0" value: "X" } output_map { key: "OUTPUT0" value: "Y" } } ] }
`;

/** A js model that records, per execution, whether the engine already called it READY (probe set by the test). */
const WARM_MODEL = `export async function execute(requests: any[]) {
  const g = globalThis as any;
  return Promise.all(requests.map(async (r: any) => {
    (g.__warmLog ??= []).push({ ready: g.__warmProbe?.(), shape: [...r.inputs.INPUT0.shape], bytes: r.inputs.INPUT0.data.byteLength });
    await new Promise((res) => setTimeout(res, 150));
    const t = r.inputs.INPUT0;
    return { outputs: { OUTPUT0: { datatype: 'FP32', shape: [...t.shape], data: Uint8Array.from(t.data) } } };
  }));
}
`;
const warmConfig = (name: string, warmInput: string) => `name: "${name}"
backend: "js"
max_batch_size: 0
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
model_warmup [ { name: "w" batch_size: 1 count: 2 inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 4 ] ${warmInput} } } } ]
`;

/** OUTPUT0 = INPUT0 * factor + offset; factor from the config's parameters, offset written into the file. */
const scaleModel = (offset: number) => `let factor = 1;
export async function initialize(ctx: any) { factor = Number(ctx.config.parameters?.factor?.string_value ?? 1); }
export async function execute(requests: any[]) {
  await new Promise((res) => setTimeout(res, 15));
  return requests.map((r: any) => {
    const x = new Float32Array(Uint8Array.from(r.inputs.INPUT0.data).buffer);
    return { outputs: { OUTPUT0: { datatype: 'FP32', shape: [...r.inputs.INPUT0.shape], data: x.map((v) => v * factor + ${offset}) } } };
  });
}
`;
const scaleConfig = (factor: string, extra = '') => `name: "scale"
backend: "js"
max_batch_size: 0
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
instance_group [ { count: 2, kind: KIND_CPU } ]
parameters { key: "factor" value: { string_value: "${factor}" } }
${extra}`;

/** Clients calling `call` back to back until stop(); counts successes and collects failures. */
function clientLoop(clients: number, call: () => Promise<unknown>) {
  let running = true;
  const failures: string[] = [];
  let ok = 0;
  const loops = Array.from({ length: clients }, async () => {
    while (running) {
      try {
        await call();
        ok++;
      } catch (err) {
        failures.push((err as Error).message);
        await sleep(20);
      }
    }
  });
  return {
    get ok() {
      return ok;
    },
    failures,
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

async function until(cond: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

describe('L0_model_control: explicit mode', { concurrent: true }, () => {
  let engine: RunningEngine;
  let repo: string;
  let grpc: TritonGrpcClient;
  const state = (name: string) => engine.server.repositoryIndex(false).find((m) => m.name === name);
  const echo = (model: string, value: number, params: Parameters = {}) =>
    grpc.modelInfer({
      model_name: model,
      inputs: [{ name: model === 'ens_echo' ? 'X' : 'INPUT0', datatype: 'FP32', shape: [1] }],
      raw_input_contents: [f32Bytes([value])],
      parameters: params,
    });
  const valueOf = (r: ModelInferResponse) => toF32(r.raw_output_contents[0]!)[0];
  const fp32Batch = (rows: number) =>
    grpc.modelInfer({
      model_name: 'simple_fp32_batch',
      inputs: [{ name: 'x', datatype: 'FP32', shape: [rows, 4] }],
      raw_input_contents: [f32Bytes(Array.from({ length: rows * 4 }, (_, i) => i))],
    });

  beforeAll(async () => {
    repo = tempRepo('l0-model-control', ['simple_fp32_batch', 'js_echo']);
    writeModel(repo, 'ens_echo', ENS_ECHO);
    writeModel(repo, 'warm_model', warmConfig('warm_model', 'zero_data: true'), { 'model.ts': WARM_MODEL });
    writeModel(repo, 'warm_broken', warmConfig('warm_broken', 'input_data_file: "missing.bin"'), { 'model.ts': WARM_MODEL });
    engine = await startTestEngine({ modelRepository: repo, controlMode: 'explicit', loadModels: ['simple_fp32_batch'] });
    grpc = new TritonGrpcClient(`127.0.0.1:${engine.grpcPort}`);
  });

  afterAll(async () => {
    grpc?.close();
    await engine?.stop();
    removeDir(repo);
    delete (globalThis as Record<string, unknown>).__warmProbe;
    delete (globalThis as Record<string, unknown>).__warmLog;
  });

  it.sequential('loads only the --load-model subset at start', async () => {
    expect(state('simple_fp32_batch')?.state).toBe('READY');
    for (const m of ['js_echo', 'ens_echo', 'warm_model']) expect(state(m)?.state, m).not.toBe('READY');
    expect((await grpc.modelReady('js_echo')).ready).toBe(false);
    expect([5, GRPC_UNAVAILABLE]).toContain((await grpcError(echo('js_echo', 1))).code);
    expect((await fp32Batch(1)).outputs[0]!.shape.map(Number)).toEqual([1, 4]);
  });

  it.sequential('loads and unloads over gRPC and over HTTP', async () => {
    await grpc.repositoryModelLoad('js_echo');
    expect(valueOf(await echo('js_echo', 3))).toBe(3);
    expect((await httpJson(engine.httpPort, 'POST', '/v2/repository/models/js_echo/unload', {})).status).toBe(200);
    expect((await grpc.modelReady('js_echo')).ready).toBe(false);
    expect((await grpcError(echo('js_echo', 1))).code).toBe(GRPC_UNAVAILABLE);
    expect((await httpJson(engine.httpPort, 'POST', '/v2/repository/models/js_echo/load', {})).status).toBe(200);
    expect(valueOf(await echo('js_echo', 4))).toBe(4);
    await grpc.repositoryModelUnload('js_echo');
    expect(state('js_echo')?.state).toBe('UNAVAILABLE');
    // A model that is not in the repository fails to load, naming it.
    const err = await grpcError(grpc.repositoryModelLoad('no_such_model'));
    expect(err.code).toBe(GRPC_INVALID_ARG);
    expect(err.details).toContain('no_such_model');
  });

  it.sequential('unload lets requests in flight finish, then refuses new ones', async () => {
    await grpc.repositoryModelLoad('js_echo');
    const inflight = [echo('js_echo', 1, { delay_ms: { int64_param: 300 } }), echo('js_echo', 2, { delay_ms: { int64_param: 300 } })];
    await sleep(50);
    const t0 = performance.now();
    await grpc.repositoryModelUnload('js_echo');
    expect(performance.now() - t0).toBeGreaterThan(400); // waited for both (one instance: 2 x 300 ms)
    expect((await Promise.all(inflight)).map(valueOf)).toEqual([1, 2]);
    expect((await grpcError(echo('js_echo', 1))).code).toBe(GRPC_UNAVAILABLE);
  });

  it.sequential('reloads with a `config` override under a client loop without failing a request', async () => {
    const loop = clientLoop(4, () => fp32Batch(1));
    await sleep(100);
    const cfg = structuredClone(engine.server.modelConfig('simple_fp32_batch')) as unknown as Record<string, any>;
    expect(cfg.max_batch_size).toBe(32);
    cfg.max_batch_size = 4;
    cfg.dynamic_batching = { preferred_batch_size: [2, 4], max_queue_delay_microseconds: 1000 };
    await grpc.repositoryModelLoad('simple_fp32_batch', { config: { string_param: JSON.stringify(cfg) } });
    await sleep(100);
    // Load and unload another model meanwhile.
    await grpc.repositoryModelLoad('js_echo');
    await grpc.repositoryModelUnload('js_echo');
    await sleep(100);
    await loop.stop();
    expect(loop.failures).toEqual([]);
    expect(loop.ok).toBeGreaterThan(20);
    expect(engine.server.modelConfig('simple_fp32_batch').max_batch_size).toBe(4);
    const tooBig = await grpcError(fp32Batch(6));
    expect(tooBig.code).toBe(GRPC_INVALID_ARG);
    // Back to the repository's config over HTTP (JSON override of the original).
    cfg.max_batch_size = 32;
    const r = await httpJson(engine.httpPort, 'POST', '/v2/repository/models/simple_fp32_batch/load', {
      parameters: { config: JSON.stringify(cfg) },
    });
    expect(r.status).toBe(200);
    const six = await fp32Batch(6);
    expect(toF32(six.raw_output_contents[0]!).slice(0, 3)).toEqual(Float32Array.from([1, 3, 5]));
  });

  it.sequential('a failed reload keeps the old version serving', async () => {
    const bad = JSON.stringify({
      name: 'simple_fp32_batch',
      platform: 'onnxruntime_onnx',
      max_batch_size: 32,
      input: [{ name: 'nope', data_type: 'TYPE_FP32', dims: [4] }],
      output: [{ name: 'y', data_type: 'TYPE_FP32', dims: [4] }],
    });
    const err = await grpcError(grpc.repositoryModelLoad('simple_fp32_batch', { config: { string_param: bad } }));
    expect(err.code).toBe(GRPC_INVALID_ARG);
    expect(err.details).toContain('simple_fp32_batch');
    expect(state('simple_fp32_batch')?.state).toBe('READY');
    expect((await fp32Batch(2)).outputs[0]!.shape.map(Number)).toEqual([2, 4]);
  });

  it.sequential('loads a model from file overrides over gRPC and HTTP', async () => {
    const config = JSON.stringify({
      name: 'js_echo',
      backend: 'js',
      max_batch_size: 0,
      input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
      output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
    });
    const doubled = JS_ECHO_MODEL.replace(
      'data: Uint8Array.from(t.data)',
      'data: new Float32Array(Uint8Array.from(t.data).buffer).map((v) => v * 2)',
    );
    expect(doubled).not.toBe(JS_ECHO_MODEL);
    await grpc.repositoryModelLoad('js_echo', {
      config: { string_param: config },
      'file:1/model.ts': { bytes_param: Buffer.from(doubled) },
    });
    expect(valueOf(await echo('js_echo', 5))).toBe(10);
    const tripled = doubled.replace('v * 2', 'v * 3');
    const r = await httpJson(engine.httpPort, 'POST', '/v2/repository/models/js_echo/load', {
      parameters: { config, 'file:1/model.ts': Buffer.from(tripled).toString('base64') },
    });
    expect(r.status, JSON.stringify(r.json)).toBe(200);
    expect(valueOf(await echo('js_echo', 5))).toBe(15);
    await grpc.repositoryModelUnload('js_echo');
  });

  it.sequential('unload_dependents unloads the ensembles that use the model', async () => {
    await grpc.repositoryModelLoad('ens_echo'); // loads its composing js_echo with it
    expect(state('js_echo')?.state).toBe('READY');
    expect(valueOf(await echo('ens_echo', 6))).toBe(6);
    await grpc.repositoryModelUnload('js_echo', { unload_dependents: { bool_param: true } });
    expect(state('js_echo')?.state).toBe('UNAVAILABLE');
    expect(state('ens_echo')?.state).toBe('UNAVAILABLE');
    expect((await grpcError(echo('ens_echo', 1))).code).toBe(GRPC_UNAVAILABLE);
    // Without it, the ensemble stays loaded (its requests then fail on the missing step).
    await grpc.repositoryModelLoad('ens_echo');
    await grpc.repositoryModelUnload('js_echo');
    expect(state('ens_echo')?.state).toBe('READY');
    expect(state('js_echo')?.state).toBe('UNAVAILABLE');
    await grpc.repositoryModelUnload('ens_echo');
  });

  it.sequential('runs model_warmup before the model reports READY', async () => {
    const g = globalThis as Record<string, any>;
    g.__warmLog = [];
    g.__warmProbe = () => engine.server.isModelReady('warm_model');
    const t0 = performance.now();
    await grpc.repositoryModelLoad('warm_model');
    expect(performance.now() - t0).toBeGreaterThanOrEqual(290); // two 150 ms warmup runs
    // Two warmup runs with the configured zero data, both while the model was not yet ready.
    expect(g.__warmLog).toEqual([
      { ready: false, shape: [4], bytes: 16 },
      { ready: false, shape: [4], bytes: 16 },
    ]);
    expect(engine.server.modelStatistics('warm_model')[0]!.execution_count).toBe(2);
    await echo('warm_model', 1);
    expect(g.__warmLog.at(-1)).toEqual({ ready: true, shape: [1], bytes: 4 });
    // A warmup that cannot run fails the load, and the model stays unavailable.
    const err = await grpcError(grpc.repositoryModelLoad('warm_broken'));
    expect(err.details).toContain('warmup');
    expect(state('warm_broken')?.state).toBe('UNAVAILABLE');
    expect(state('warm_broken')?.reason).toContain('missing.bin');
  });
});

describe('L0_model_control: poll mode', { concurrent: true }, () => {
  let engine: RunningEngine;
  let repo: string;
  let grpc: TritonGrpcClient;
  const dir = () => path.join(repo, 'scale');
  const call = async (v: number) => {
    const r = await grpc.modelInfer({
      model_name: 'scale',
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }],
      raw_input_contents: [f32Bytes([v])],
    });
    return { value: toF32(r.raw_output_contents[0]!)[0]!, version: r.model_version };
  };

  beforeAll(async () => {
    repo = tempRepo('l0-model-poll');
    writeModel(repo, 'scale', scaleConfig('2'), { 'model.ts': scaleModel(0) });
    engine = await startTestEngine({ modelRepository: repo, controlMode: 'poll', repositoryPollSecs: 1 });
    grpc = new TritonGrpcClient(`127.0.0.1:${engine.grpcPort}`);
  });

  afterAll(async () => {
    grpc?.close();
    await engine?.stop();
    removeDir(repo);
  });

  it.sequential('reloads a changed config and model file under a client loop with zero failed requests', async () => {
    expect(await call(5)).toEqual({ value: 10, version: '1' });
    let last = { value: 0, version: '' };
    const loop = clientLoop(4, async () => (last = await call(5)));
    try {
      await sleep(200);
      writeFileSync(path.join(dir(), 'config.pbtxt'), scaleConfig('3'));
      await until(() => last.value === 15, 5000, 'the new config to serve');
      writeFileSync(path.join(dir(), '1', 'model.ts'), scaleModel(100));
      await until(() => last.value === 115, 5000, 'the new model file to serve');
      // A new version folder: version 2 takes over (default policy: latest).
      writeModel(repo, 'scale', scaleConfig('3'), { 'model.ts': scaleModel(1000) }, 2);
      await until(() => last.version === '2', 5000, 'version 2 to serve');
      await sleep(200);
    } finally {
      await loop.stop();
    }
    expect(loop.failures).toEqual([]);
    expect(loop.ok).toBeGreaterThan(50);
    expect(await call(5)).toEqual({ value: 1015, version: '2' });
  });

  it.sequential('keeps the old version serving when a reload fails', async () => {
    const loop = clientLoop(2, () => call(1));
    try {
      writeFileSync(path.join(dir(), 'config.pbtxt'), scaleConfig('4', 'instance_group [ { count: two } ]\n'));
      await sleep(2600); // at least two polls
    } finally {
      await loop.stop();
    }
    expect(loop.failures).toEqual([]);
    const entry = engine.server.repositoryIndex(false).find((m) => m.name === 'scale');
    expect(entry?.state).toBe('READY');
    expect(await call(5)).toEqual({ value: 1015, version: '2' });
    // Fixed again: the next poll loads it.
    writeFileSync(path.join(dir(), 'config.pbtxt'), scaleConfig('4'));
    await until(async () => (await call(5)).value === 1020, 5000, 'the fixed config to serve');
  });
});
