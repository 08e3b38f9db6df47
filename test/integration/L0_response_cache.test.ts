// The response cache on the real engine: a repeated request is answered from
// the cache with the same bytes and the model does not run (its execution
// count stays put), cache_hit / cache_miss show in statistics and nv_cache_*
// in metrics, a whole ensemble is cached, the local cache stays within its
// size, Redis is shared between two engines, and a Redis that is down only
// means misses.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import type { InferRequest } from '../../engine/api/infer-request.ts';
import { JS_ECHO_CONFIG } from '../fixtures/test-models.ts';
import { Redis } from 'ioredis';
import { TestRedis, waitFor } from './L0_gateway-support.ts';
import { f32Bytes, freePort, httpJson, protoLoaderClient, removeDir, startTestEngine, tempRepo } from './helpers.ts';

const CACHED = '\nresponse_cache { enable: true }\n';
const ENSEMBLE = `name: "ens_echo"
platform: "ensemble"
max_batch_size: 0
input [ { name: "X", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "Y", data_type: TYPE_FP32, dims: [ -1 ] } ]
ensemble_scheduling { step [ { model_name: "js_echo" model_version: -1 input_map { key: "INPUT0" value: "X" } output_map { key: "OUTPUT0" value: "Y" } } ] }
response_cache { enable: true }
`;

function cachedRepo(): string {
  const repo = tempRepo('l0-cache', ['js_echo', 'simple']);
  writeFileSync(path.join(repo, 'js_echo', 'config.pbtxt'), JS_ECHO_CONFIG + CACHED);
  const simple = path.join(repo, 'simple', 'config.pbtxt');
  writeFileSync(simple, readFileSync(simple, 'utf8') + CACHED);
  mkdirSync(path.join(repo, 'ens_echo', '1'), { recursive: true });
  writeFileSync(path.join(repo, 'ens_echo', 'config.pbtxt'), ENSEMBLE);
  return repo;
}

const echo = (model: string, values: number[], input = model === 'ens_echo' ? 'X' : 'INPUT0'): InferRequest => ({
  modelName: model,
  inputs: [{ name: input, datatype: 'FP32', shape: [values.length], data: new Uint8Array(f32Bytes(values)) }],
  outputs: [],
  parameters: {},
});
const stats = (e: RunningEngine, model: string) => e.server.modelStatistics(model)[0]!;

const repos: string[] = [];
const engines: RunningEngine[] = [];
const redises: TestRedis[] = [];
afterAll(async () => {
  for (const e of engines) await e.stop();
  for (const r of redises) await r.stop();
  for (const r of repos) removeDir(r);
});

async function engineWith(cacheConfig: Parameters<typeof startTestEngine>[0]['cacheConfig']): Promise<RunningEngine> {
  const repo = cachedRepo();
  repos.push(repo);
  const e = await startTestEngine({ modelRepository: repo, cacheConfig });
  engines.push(e);
  return e;
}

describe('local response cache', () => {
  it('answers a repeated request from the cache without running the model', async () => {
    const e = await engineWith({ kind: 'local', size: 1 << 20 });
    const client = protoLoaderClient(e.grpcPort);
    try {
      const call = () =>
        client.call('ModelInfer', {
          model_name: 'simple',
          inputs: [
            { name: 'INPUT0', datatype: 'INT32', shape: [1, 16] },
            { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
          ],
          raw_input_contents: [
            Buffer.from(Int32Array.from({ length: 16 }, (_, i) => i).buffer),
            Buffer.from(new Int32Array(16).fill(2).buffer),
          ],
        });
      const first = await call();
      const afterMiss = stats(e, 'simple');
      expect(afterMiss.execution_count).toBe(1);
      expect(afterMiss.inference_stats.cache_miss.count).toBe(1);
      const second = await call();
      const afterHit = stats(e, 'simple');
      expect(afterHit.execution_count).toBe(1); // the model did not run
      expect(afterHit.inference_stats.cache_hit.count).toBe(1);
      expect(afterHit.inference_stats.success.count).toBe(2);
      expect(second.raw_output_contents).toEqual(first.raw_output_contents);
      expect(second.outputs).toEqual(first.outputs);
      // Over the wire, as a Triton client reads them.
      const wire = await client.call('ModelStatistics', { name: 'simple' });
      expect(Number(wire.model_stats[0].inference_stats.cache_hit.count)).toBe(1);
      const metrics = await (await fetch(`http://127.0.0.1:${e.metricsPort}/metrics`)).text();
      expect(metrics).toMatch(/nv_cache_num_hits_per_model\{model="simple",version="1"\} 1/);
      expect(metrics).toMatch(/nv_cache_num_misses_per_model\{model="simple",version="1"\} 1/);
      expect(metrics).toMatch(/nv_cache_num_entries \d+/);
    } finally {
      client.close();
    }
  });

  it('a different input is a miss; an ensemble is cached whole, and its step by itself', async () => {
    const e = engines[0]!;
    await e.server.infer(echo('js_echo', [1, 2]));
    await e.server.infer(echo('js_echo', [1, 3]));
    expect(stats(e, 'js_echo').execution_count).toBe(2);
    const a = await e.server.infer(echo('ens_echo', [7, 8, 9]));
    expect(stats(e, 'js_echo').execution_count).toBe(3);
    const b = await e.server.infer(echo('ens_echo', [7, 8, 9]));
    expect(stats(e, 'js_echo').execution_count).toBe(3);
    expect(stats(e, 'ens_echo').inference_stats.cache_hit.count).toBe(1);
    expect(Buffer.from(b.outputs[0]!.data)).toEqual(Buffer.from(a.outputs[0]!.data));
    // The step's own entry: the same tensor straight to js_echo hits.
    await e.server.infer(echo('js_echo', [7, 8, 9]));
    expect(stats(e, 'js_echo').execution_count).toBe(3);
    expect(stats(e, 'js_echo').inference_stats.cache_hit.count).toBe(1);
  });

  it('stays within its size bound under many distinct responses', async () => {
    const e = await engineWith({ kind: 'local', size: 4096 });
    for (let i = 0; i < 60; i++) {
      await e.server.infer(
        echo(
          'js_echo',
          Array.from({ length: 32 }, (_, j) => i * 100 + j),
        ),
      );
      expect(e.engine.sharingStatus().cache!.bytes).toBeLessThanOrEqual(4096);
    }
    const c = e.engine.sharingStatus().cache!;
    expect(c.evictions).toBeGreaterThan(0);
    expect(c.entries).toBeGreaterThan(0);
    // The most recent response is still there; the first was evicted.
    await e.server.infer(
      echo(
        'js_echo',
        Array.from({ length: 32 }, (_, j) => 59 * 100 + j),
      ),
    );
    await e.server.infer(
      echo(
        'js_echo',
        Array.from({ length: 32 }, (_, j) => j),
      ),
    );
    const s = stats(e, 'js_echo');
    expect(s.inference_stats.cache_hit.count).toBe(1);
    expect(s.execution_count).toBe(61);
  });
});

describe('redis response cache', () => {
  it('is shared by two engines on one Redis', async () => {
    const redis = await TestRedis.start();
    redises.push(redis);
    const cfg = { kind: 'redis' as const, host: '127.0.0.1', port: redis.port, prefix: `l0-cache-${process.pid}:` };
    const a = await engineWith(cfg);
    const b = await engineWith(cfg);
    const ra = await a.server.infer(echo('js_echo', [4, 5, 6]));
    // The insert is not awaited by the request; wait until it landed in Redis.
    const probe = new Redis({ port: redis.port, host: '127.0.0.1' });
    try {
      await waitFor('cache entry in redis', async () => (await probe.keys(`${cfg.prefix}*`)).length > 0);
    } finally {
      probe.disconnect();
    }
    const rb = await b.server.infer(echo('js_echo', [4, 5, 6]));
    expect(stats(a, 'js_echo').execution_count).toBe(1);
    expect(stats(b, 'js_echo').execution_count).toBe(0);
    expect(stats(b, 'js_echo').inference_stats.cache_hit.count).toBe(1);
    expect(Buffer.from(rb.outputs[0]!.data)).toEqual(Buffer.from(ra.outputs[0]!.data));
  });

  it('with Redis down, every request is a miss and none fails', async () => {
    const e = await engineWith({ kind: 'redis', host: '127.0.0.1', port: await freePort() });
    for (let i = 0; i < 3; i++) {
      const r = await e.server.infer(echo('js_echo', [1, 1]));
      expect(r.outputs[0]!.shape).toEqual([2]);
    }
    const s = stats(e, 'js_echo');
    expect(s.execution_count).toBe(3);
    expect(s.inference_stats.cache_miss.count).toBe(3);
    expect(s.inference_stats.cache_hit.count).toBe(0);
    expect(s.inference_stats.fail.count).toBe(0);
    const { status } = await httpJson(e.httpPort, 'GET', '/v2/models/js_echo/stats');
    expect(status).toBe(200);
  });
});
