// The function gateway in front of the real engine (bundled model repository):
// routes, inputs (raw / JSON / multipart), inline vs. shm staging (answers
// equal the engine's own), binary replies, the error catalog, metrics,
// OpenAPI, and the engine going away and coming back.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TritonGrpcClient } from '../../client/grpc-client.ts';
import { listSharedMemoryKeys } from '../../client/shared-memory.ts';
import { startEngine } from '../../engine/server/server.ts';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { setQuiet } from '../../common/logger.ts';
import { makeJpeg, makeLargeJpeg } from '../fixtures/images.ts';
import { waitFor } from './L0_gateway-support.ts';

type Engine = Awaited<ReturnType<typeof startEngine>>;
type Json = Record<string, any>;

const REPO = path.join(import.meta.dirname, '../../model_repository');
let engine: Engine;
let gw: RunningGateway;
let direct: TritonGrpcClient;
let base: string;
let fnDir: string;
let small: Buffer;
let large: Buffer;

async function engineVector(model: string, image: Buffer, output = 'FINAL_VECTOR'): Promise<number[]> {
  const r = await direct.modelInfer({
    model_name: model,
    inputs: [{ name: 'RAW_IMAGE', datatype: 'UINT8', shape: [image.length] }],
    outputs: [{ name: output }],
    raw_input_contents: [image],
  });
  const b = r.raw_output_contents[0]!;
  return [...new Float32Array(Uint8Array.from(b).buffer)];
}

const post = (fn: string, body: Buffer | string | FormData, headers: Record<string, string> = {}) =>
  fetch(`${base}/fn/${fn}`, { method: 'POST', body, headers });

beforeAll(async () => {
  setQuiet(true);
  engine = await startEngine({ modelRepository: REPO, grpcPort: 0, httpPort: -1, metricsPort: -1, allowClientShm: true });
  direct = new TritonGrpcClient(`127.0.0.1:${engine.grpcPort}`);
  fnDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-fn-'));
  for (const f of fs.readdirSync(path.join(import.meta.dirname, '../../functions'))) {
    fs.copyFileSync(path.join(import.meta.dirname, '../../functions', f), path.join(fnDir, f));
  }
  fs.writeFileSync(
    path.join(fnDir, 'hasty_search.json'),
    JSON.stringify({
      name: 'hasty_search',
      target: { model: 'search_pipeline_ensemble' },
      limits: { timeoutMs: 1, maxBodyBytes: 64 << 20 },
    }),
  );
  process.env.RECOMMENDER_API_KEYS = 'k-one, k-two';
  gw = await startGateway({
    port: 0,
    host: '127.0.0.1',
    engine: `127.0.0.1:${engine.grpcPort}`,
    functions: fnDir,
    shmThreshold: 65536,
    leaseTtlMs: 2000,
    arenaRegions: 2,
    arenaRegionBytes: 16 << 20,
    prefix: 'tgwtest',
  });
  base = `http://127.0.0.1:${gw.port}`;
  small = await makeJpeg(96, 80, 3);
  large = await makeLargeJpeg(3 << 20);
}, 180_000);

afterAll(async () => {
  await gw?.stop();
  direct?.close();
  await engine?.stop();
  if (fnDir) fs.rmSync(fnDir, { recursive: true, force: true });
  delete process.env.RECOMMENDER_API_KEYS;
});

describe('gateway routes', () => {
  it('lists ensembles and defined functions with inputs and outputs', async () => {
    const r = (await (await fetch(`${base}/fn`)).json()) as Json;
    const byName = Object.fromEntries(r.functions.map((f: Json) => [f.name, f]));
    expect(Object.keys(byName)).toEqual(
      expect.arrayContaining(['search_pipeline_ensemble', 'moderated_search_ensemble', 'image_search', 'product_recommender']),
    );
    expect(byName.search_pipeline_ensemble.inputs).toEqual([{ name: 'RAW_IMAGE', tensor: 'RAW_IMAGE', datatype: 'UINT8', shape: [-1] }]);
    expect(byName.image_search.outputs).toEqual([{ name: 'embedding', tensor: 'FINAL_VECTOR', datatype: 'FP32', shape: [512] }]);
    expect(byName.moderated_search_ensemble.outputs.map((o: Json) => o.name).sort()).toEqual(['FINAL_VECTOR', 'HARMFUL_PROBABILITIES']);
    expect(byName.product_recommender.auth).toBe(true);
  });

  it('healthz, readyz with lease-store and staging detail, openapi', async () => {
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    const ready = await fetch(`${base}/readyz`);
    expect(ready.status).toBe(200);
    const d = (await ready.json()) as Json;
    expect(d.engine.ready).toBe(true);
    expect(d.leaseStore).toEqual({ kind: 'memory', state: 'up' });
    expect(d.staging.enabled).toBe(true);
    expect(d.staging.leasesHeld).toBe(2);
    const doc = (await (await fetch(`${base}/openapi.json`)).json()) as Json;
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.paths['/fn/search_pipeline_ensemble'].post.requestBody.content['image/jpeg']).toBeDefined();
    expect(doc.paths['/jobs/{id}'].get).toBeDefined();
    expect(doc.paths['/admin/functions'].put.requestBody.content['application/json'].schema.$ref).toBe(
      '#/components/schemas/FunctionBundle',
    );
    expect(doc.components.schemas.FunctionBundle.properties.functions).toBeDefined();
  });

  it('registered its arena regions with the engine and on /dev/shm', async () => {
    const regions = await direct.systemSharedMemoryStatus();
    const mine = gw.arena!.regionKeys.map((r) => r.region).sort();
    expect(
      Object.keys(regions)
        .filter((n) => n.startsWith('tgwtest_'))
        .sort(),
    ).toEqual(mine);
    expect(listSharedMemoryKeys('/tgwtest_').sort()).toEqual(mine.map((n) => `/${n}`));
  });
});

describe('calls', () => {
  it('small JPEG goes inline and equals the engine’s own answer', async () => {
    const want = await engineVector('search_pipeline_ensemble', small);
    const r = await post('search_pipeline_ensemble', small, { 'Content-Type': 'image/jpeg' });
    expect(r.status).toBe(200);
    expect(r.headers.get('x-payload-transfer')).toBe('inline');
    const body = (await r.json()) as Json;
    expect(body.outputs.FINAL_VECTOR.shape).toEqual([512]);
    expect(body.outputs.FINAL_VECTOR.datatype).toBe('FP32');
    expect(body.outputs.FINAL_VECTOR.data).toEqual(want);
  });

  it('multi-megabyte JPEG is staged through shm and equals the engine’s own answer', async () => {
    expect(large.length).toBeGreaterThan(3 << 20);
    const want = await engineVector('search_pipeline_ensemble', large);
    const before = await (await fetch(`${base}/metrics`)).text();
    const r = await post('search_pipeline_ensemble', large, { 'Content-Type': 'image/jpeg' });
    expect(r.status).toBe(200);
    expect(r.headers.get('x-payload-transfer')).toBe('shm');
    expect(((await r.json()) as Json).outputs.FINAL_VECTOR.data).toEqual(want);
    expect(gw.arena!.status().bytesInUse).toBe(0); // slices went back
    const after = await (await fetch(`${base}/metrics`)).text();
    const staged = (t: string) => Number(/gateway_staged_bytes_total\{direction="in"\} (\d+)/.exec(t)?.[1] ?? 0);
    expect(staged(after) - staged(before)).toBe(large.length);
    expect(after).toMatch(/gateway_function_calls_total\{function="search_pipeline_ensemble",code="200",transfer="shm"\} \d+/);
  });

  it('renamed function, JSON base64 and multipart inputs give the same vector', async () => {
    const want = await engineVector('search_pipeline_ensemble', small);
    const j = await post('image_search', JSON.stringify({ inputs: { image: { b64: small.toString('base64') } } }), {
      'Content-Type': 'application/json',
    });
    expect(((await j.json()) as Json).outputs.embedding.data).toEqual(want);
    const form = new FormData();
    form.append('image', new Blob([small], { type: 'image/jpeg' }), 'x.jpg');
    const m = await post('image_search', form);
    expect(m.status).toBe(200);
    expect(((await m.json()) as Json).outputs.embedding.data).toEqual(want);
  });

  it('large JSON body is staged too', async () => {
    const want = await engineVector('search_pipeline_ensemble', large);
    const r = await post('image_search', JSON.stringify({ inputs: { image: { b64: large.toString('base64') } } }), {
      'Content-Type': 'application/json',
    });
    expect(r.headers.get('x-payload-transfer')).toBe('shm');
    expect(((await r.json()) as Json).outputs.embedding.data).toEqual(want);
  });

  it('Accept: application/octet-stream returns one output’s raw bytes', async () => {
    const want = await engineVector('moderated_search_ensemble', large, 'HARMFUL_PROBABILITIES');
    const r = await post('moderated_search_ensemble?output=HARMFUL_PROBABILITIES', large, {
      'Content-Type': 'image/jpeg',
      Accept: 'application/octet-stream',
    });
    expect(r.status).toBe(200);
    expect(r.headers.get('x-payload-transfer')).toBe('shm');
    expect(r.headers.get('x-output-shape')).toBe('2');
    const bytes = new Uint8Array(await r.arrayBuffer());
    expect([...new Float32Array(bytes.buffer)]).toEqual(want);
    const both = await post('moderated_search_ensemble', small, { 'Content-Type': 'image/jpeg', Accept: 'application/octet-stream' });
    expect(both.status).toBe(406);
    expect(((await both.json()) as Json).error.code).toBe('OUTPUT_NOT_ACCEPTABLE');
  });

  it('API keys, input checks and limits answer from the catalog', async () => {
    const row = Array.from({ length: 64 }, (_, i) => i / 64);
    const body = JSON.stringify({ inputs: { user_features: [row, row] } });
    const h = { 'Content-Type': 'application/json' };
    const none = await post('product_recommender', body, h);
    expect(none.status).toBe(401);
    expect(none.headers.get('x-payload-transfer')).toBe('inline');
    expect((await post('product_recommender', body, { ...h, 'X-API-Key': 'wrong' })).status).toBe(403);
    const ok = await post('product_recommender', body, { ...h, Authorization: 'Bearer k-two' });
    expect(ok.status).toBe(200);
    const out = ((await ok.json()) as Json).outputs.scores;
    expect(out.shape).toEqual([2, 100]);
    const d = await direct.modelInfer({
      model_name: 'product_recommender_model',
      inputs: [{ name: 'user_features', datatype: 'FP32', shape: [2, 64] }],
      raw_input_contents: [Buffer.from(new Float32Array([...row, ...row]).buffer)],
    });
    expect(out.data).toEqual([...new Float32Array(Uint8Array.from(d.raw_output_contents[0]!).buffer)]);

    const bad = await post('product_recommender', JSON.stringify({ inputs: { user_features: [[1, 2, 3]] } }), {
      ...h,
      'X-API-Key': 'k-one',
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as Json).error).toMatchObject({
      code: 'INPUT_INVALID',
      message: expect.stringContaining("input 'user_features'"),
    });
    const big = await post('product_recommender', Buffer.alloc(2 << 20, 32), { ...h, 'X-API-Key': 'k-one' });
    expect(big.status).toBe(413);
    const missing = await post('nonexistent_fn', small, { 'Content-Type': 'image/jpeg' });
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as Json).error.code).toBe('FUNCTION_NOT_FOUND');
    const raw = await post('product_recommender', small, { 'Content-Type': 'image/jpeg', 'X-API-Key': 'k-one' });
    expect(((await raw.json()) as Json).error.code).toBe('RAW_BODY_AMBIGUOUS');
  });

  it('an engine deadline answers 504 and frees the staging slices', async () => {
    const r = await post('hasty_search', large, { 'Content-Type': 'image/jpeg' });
    expect(r.status).toBe(504);
    expect(((await r.json()) as Json).error.code).toBe('ENGINE_TIMEOUT');
    expect(gw.arena!.status().bytesInUse).toBe(0);
  });
});

describe('engine restarts', () => {
  it('answers 503 while the engine is down, then re-registers its regions and stages again', async () => {
    const port = engine.grpcPort;
    await engine.stop();
    const down = await post('search_pipeline_ensemble', small, { 'Content-Type': 'image/jpeg' });
    expect(down.status).toBe(503);
    expect(((await down.json()) as Json).error.code).toBe('ENGINE_UNAVAILABLE');
    expect((await fetch(`${base}/readyz`)).status).toBe(503);
    engine = await startEngine({ modelRepository: REPO, grpcPort: port, httpPort: -1, metricsPort: -1, allowClientShm: true });
    await waitFor('gateway ready again', async () => (await fetch(`${base}/readyz`)).status === 200, 30_000, 100);
    await waitFor(
      'regions re-registered',
      async () => {
        const regions = await direct.systemSharedMemoryStatus();
        return gw.arena!.regionKeys.every((r) => regions[r.region]);
      },
      10_000,
      100,
    );
    const want = await engineVector('search_pipeline_ensemble', large);
    const r = await post('search_pipeline_ensemble', large, { 'Content-Type': 'image/jpeg' });
    expect(r.status).toBe(200);
    expect(r.headers.get('x-payload-transfer')).toBe('shm');
    expect(((await r.json()) as Json).outputs.FINAL_VECTOR.data).toEqual(want);
  }, 120_000);

  it('stop() unregisters and unlinks every region', async () => {
    const names = gw.arena!.regionKeys.map((r) => r.region);
    await gw.stop();
    const regions = await direct.systemSharedMemoryStatus();
    for (const n of names) expect(regions[n]).toBeUndefined();
    expect(listSharedMemoryKeys('/tgwtest_')).toEqual([]);
  });
});
