// The response cache never answers with what the model would not say now,
// on the real engine and a private redis-server: a model reloaded with new
// code under the same name and version answers from the new code; a request
// parameter the model reads is part of the key (scheduling ones are not);
// Redis entries expire (a default TTL, or ttl_ms); a Redis value that does
// not fit the model's config (wrong datatype, a shape its bytes cannot hold,
// an output the model does not have, garbage) is a miss and is deleted.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { mkdtempSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import type { RunningEngine } from '../../engine/server/server.ts';
import type { InferRequest, ParamValue } from '../../engine/api/infer-request.ts';
import { decodeTensors, encodeTensors } from '../../engine/sharing/response-cache-codec.ts';
import { DEFAULT_REDIS_TTL_MS, type CacheConfig } from '../../engine/sharing/response-cache.ts';
import { TestRedis, waitFor } from './L0_gateway-support.ts';
import { f32Bytes, httpJson, removeDir, startTestEngine, toF32 } from './helpers.ts';

const CONFIG = `name: "scaler"
backend: "js"
default_model_filename: "model.ts"
max_batch_size: 0
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
response_cache { enable: true }
`;
/** OUTPUT0 = INPUT0 * factor * (parameter `scale`, default 1). */
const model = (factor: number) => `type T = { datatype: string; shape: number[]; data: Uint8Array };
export async function execute(requests: Array<{ inputs: Record<string, T>; parameters: Record<string, unknown> }>) {
  return requests.map((r) => {
    const t = r.inputs.INPUT0!;
    const x = new Float32Array(Uint8Array.from(t.data).buffer);
    const k = ${factor} * Number(r.parameters.scale ?? 1);
    return { outputs: { OUTPUT0: { datatype: 'FP32', shape: [...t.shape], data: new Uint8Array(Float32Array.from(x, (v) => v * k).buffer) } } };
  });
}
`;

function scalerRepo(factor: number): string {
  const repo = mkdtempSync(path.join(os.tmpdir(), 'l0-cache-safety-'));
  mkdirSync(path.join(repo, 'scaler', '1'), { recursive: true });
  writeFileSync(path.join(repo, 'scaler', 'config.pbtxt'), CONFIG);
  writeFileSync(path.join(repo, 'scaler', '1', 'model.ts'), model(factor));
  return repo;
}

const scaler = (values: number[], parameters: Record<string, ParamValue> = {}): InferRequest => ({
  modelName: 'scaler',
  inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [values.length], data: new Uint8Array(f32Bytes(values)) }],
  outputs: [],
  parameters,
});
const values = async (e: RunningEngine, req: InferRequest) => Array.from(toF32((await e.server.infer(req)).outputs[0]!.data));
const stats = (e: RunningEngine) => e.server.modelStatistics('scaler')[0]!;

let redis: TestRedis;
let probe: Redis;
const repos: string[] = [];
const engines: RunningEngine[] = [];
let n = 0;

beforeAll(async () => {
  redis = await TestRedis.start();
  probe = new Redis({ port: redis.port, host: '127.0.0.1' });
});
afterAll(async () => {
  for (const e of engines) await e.stop();
  probe?.disconnect();
  await redis?.stop();
  for (const r of repos) removeDir(r);
});

async function engineWith(
  cache: 'local' | Partial<Extract<CacheConfig, { kind: 'redis' }>>,
): Promise<{ e: RunningEngine; repo: string; prefix: string }> {
  const repo = scalerRepo(2);
  repos.push(repo);
  const prefix = `l0-safety-${process.pid}-${++n}:`;
  const cacheConfig: CacheConfig =
    cache === 'local' ? { kind: 'local', size: 1 << 20 } : { kind: 'redis', host: '127.0.0.1', port: redis.port, prefix, ...cache };
  const e = await startTestEngine({ modelRepository: repo, controlMode: 'explicit', loadModels: ['scaler'], cacheConfig });
  engines.push(e);
  if (cache !== 'local') await connected(e, prefix);
  return { e, repo, prefix };
}

/**
 * Until the engine's Redis client is connected an insert is dropped (no
 * offline queue, by design): send a probe request until its entry lands,
 * then clear the prefix and the statistics' baseline is what the tests count from.
 */
async function connected(e: RunningEngine, prefix: string): Promise<void> {
  await waitFor(
    'the engine connected to redis',
    async () => {
      await e.server.infer(scaler([-1]));
      return (await probe.keys(`${prefix}*`)).length > 0;
    },
    10_000,
    100,
  );
  const keys = await probe.keys(`${prefix}*`);
  await probe.del(...keys);
}

/** The one Redis key under `prefix`, once the (unawaited) insert has landed. */
async function onlyKey(prefix: string): Promise<string> {
  await waitFor('cache entry in redis', async () => (await probe.keys(`${prefix}*`)).length > 0);
  const keys = await probe.keys(`${prefix}*`);
  expect(keys).toHaveLength(1);
  return keys[0]!;
}

describe('L0_response_cache_safety', () => {
  it.each(['local', 'redis'] as const)(
    '%s: a model reloaded with new code under the same name and version answers from the new code',
    async (kind) => {
      const { e, repo, prefix } = await engineWith(kind === 'local' ? 'local' : {});
      const hits = stats(e).inference_stats.cache_hit.count;
      expect(await values(e, scaler([1, 2]))).toEqual([2, 4]);
      if (kind === 'redis') await onlyKey(prefix);
      expect(await values(e, scaler([1, 2]))).toEqual([2, 4]);
      expect(stats(e).inference_stats.cache_hit.count).toBe(hits + 1);
      writeFileSync(path.join(repo, 'scaler', '1', 'model.ts'), model(3));
      expect((await httpJson(e.httpPort, 'POST', '/v2/repository/models/scaler/load')).status).toBe(200);
      expect(await values(e, scaler([1, 2]))).toEqual([3, 6]);
      expect(stats(e).execution_count).toBe(1); // the reloaded version ran: nothing came from the old code's entry
    },
  );

  it('a parameter the model reads is part of the key; priority and timeout are not', async () => {
    const { e } = await engineWith('local');
    expect(await values(e, scaler([1, 2]))).toEqual([2, 4]);
    expect(await values(e, scaler([1, 2], { scale: 10 }))).toEqual([20, 40]);
    expect(await values(e, scaler([1, 2], { scale: 10, priority: 0, timeout: 10_000_000 }))).toEqual([20, 40]);
    expect(stats(e).execution_count).toBe(2);
    expect(stats(e).inference_stats.cache_hit.count).toBe(1);
  });

  it('Redis entries expire: a default TTL, or ttl_ms', async () => {
    const dflt = await engineWith({});
    await values(dflt.e, scaler([5]));
    const ttl = await probe.pttl(await onlyKey(dflt.prefix));
    expect(ttl).toBeGreaterThan(DEFAULT_REDIS_TTL_MS - 60_000);
    expect(ttl).toBeLessThanOrEqual(DEFAULT_REDIS_TTL_MS);
    const short = await engineWith({ ttlMs: 1500 });
    await values(short.e, scaler([5]));
    const key = await onlyKey(short.prefix);
    expect(await probe.pttl(key)).toBeLessThanOrEqual(1500);
    await waitFor('entry expired', async () => (await probe.exists(key)) === 0, 5000);
  });

  it('a Redis value that does not fit the config is a miss, deleted, and the model answers', async () => {
    const { e, prefix } = await engineWith({});
    const ran = stats(e).execution_count;
    expect(await values(e, scaler([1, 2]))).toEqual([2, 4]);
    const key = await onlyKey(prefix);
    const crafted = [
      // "a shape of a million over 8 bytes"
      encodeTensors([{ name: 'OUTPUT0', datatype: 'FP32', shape: [1_000_000], data: new Uint8Array(8) }]),
      encodeTensors([{ name: 'OUTPUT0', datatype: 'FP64', shape: [1], data: new Uint8Array(8) }]),
      encodeTensors([{ name: 'EVIL', datatype: 'FP32', shape: [2], data: new Uint8Array(8) }]),
      encodeTensors([]),
      Buffer.from('not an entry at all'),
    ];
    for (const [i, bad] of crafted.entries()) {
      await probe.set(key, Buffer.from(bad));
      const r = await e.server.infer(scaler([1, 2]));
      expect(r.outputs.map((o) => [o.name, o.datatype, o.shape])).toEqual([['OUTPUT0', 'FP32', [2]]]);
      expect(Array.from(toF32(r.outputs[0]!.data))).toEqual([2, 4]);
      expect(stats(e).execution_count).toBe(ran + 2 + i);
      // Replaced by the model's own answer.
      await waitFor('fresh entry', async () => {
        const v = await probe.getBuffer(key);
        return !!v && decodeTensors(v)?.[0]?.shape.join() === '2';
      });
    }
    const hits = stats(e).inference_stats.cache_hit.count;
    expect(await values(e, scaler([1, 2]))).toEqual([2, 4]);
    expect(stats(e).inference_stats.cache_hit.count).toBe(hits + 1);
  });
});
