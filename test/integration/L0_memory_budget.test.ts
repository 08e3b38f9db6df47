// The memory budget and on-demand loading on the real engine, with real ONNX
// models of known size (4 MiB initializers): a request loads its model, the
// budget is never exceeded (sampled every few ms), the least recently used
// idle model is evicted, a pinned model and a hot one stay, in-flight
// requests never fail because of an eviction, and the wait for a load counts
// as queue time.
import { mkdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { ElemType, GraphBuilder } from '../../model_repository/onnx-builder.ts';
import { httpJson, removeDir, startTestEngine, tempRepo } from './helpers.ts';

const IN = 64;
const COLS = 16384; // 64 x 16384 FP32 = 4 MiB of weights

/** FP32 [batch, 64] -> [batch, 1]: mean of x·W, W a 4 MiB initializer. */
function buildBigMlp(seed: number): Uint8Array {
  const g = new GraphBuilder(`big_mlp_${seed}`, seed);
  g.input('x', ElemType.FLOAT, ['batch', IN]);
  const h = g.node('MatMul', ['x', g.randomWeight('w', [IN, COLS], IN)]);
  g.node('ReduceMean', [h], { axes: [1], keepdims: 1 }, 'y');
  g.output('y', ElemType.FLOAT, ['batch', 1]);
  return g.build();
}

const config = (name: string, pinned = false) => `name: "${name}"
platform: "onnxruntime_onnx"
max_batch_size: 4
input [ { name: "x", data_type: TYPE_FP32, dims: [ ${IN} ] } ]
output [ { name: "y", data_type: TYPE_FP32, dims: [ 1 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
${pinned ? 'parameters { key: "pinned" value: { string_value: "true" } }' : ''}
`;

const MODELS = ['m0', 'm1', 'm2', 'pinned'];
let repo: string;
let cost: number;
let engine: RunningEngine;

beforeAll(async () => {
  repo = tempRepo('l0-budget');
  MODELS.forEach((m, i) => {
    mkdirSync(path.join(repo, m, '1'), { recursive: true });
    writeFileSync(path.join(repo, m, 'config.pbtxt'), config(m, m === 'pinned'));
    writeFileSync(path.join(repo, m, '1', 'model.onnx'), buildBigMlp(i + 1));
  });
  cost = statSync(path.join(repo, 'm0', '1', 'model.onnx')).size;
  // Room for three models: the pinned one and two others.
  engine = await startTestEngine({ modelRepository: repo, controlMode: 'on-demand', modelMemoryBudget: Math.floor(cost * 3.5), onDemandTimeoutMs: 60_000 });
});

afterAll(async () => {
  await engine?.stop();
  removeDir(repo);
});

const infer = (model: string) =>
  engine.server.infer({ modelName: model, inputs: [{ name: 'x', datatype: 'FP32', shape: [1, IN], data: new Uint8Array(new Float32Array(IN).fill(0.5).buffer) }], outputs: [], parameters: {} });
const state = (m: string) => engine.server.repositoryIndex(false).find((e) => e.name === m)!;
const budget = () => engine.engine.budget!.status();

/** Sample the budget's books every 2 ms until stopped; returns the highest use seen. */
function sampler(): { stop(): number } {
  let max = 0;
  const t = setInterval(() => (max = Math.max(max, budget().usedBytes)), 2);
  return { stop: () => (clearInterval(t), Math.max(max, budget().usedBytes)) };
}

describe('memory budget with on-demand loading', () => {
  it('loads on request, charges each model its size, evicts the least recently used idle model, keeps the pinned one', async () => {
    expect(state('m0').state).not.toBe('READY');
    await infer('pinned');
    await infer('m0');
    await infer('m1');
    expect(budget().models.map((m) => m.name)).toEqual(['m0', 'm1', 'pinned']);
    for (const m of budget().models) expect(m.bytes).toBe(cost);
    expect(state('m0').resident_bytes).toBe(cost);
    await infer('m0'); // m1 is now the least recently used
    const s = sampler();
    await infer('m2');
    expect(s.stop()).toBeLessThanOrEqual(budget().budgetBytes);
    expect(state('m1').state).toBe('UNAVAILABLE');
    expect(state('m1').reason).toMatch(/evicted/);
    expect(state('m0').state).toBe('READY');
    expect(state('pinned').state).toBe('READY');
    expect(budget().evictions).toBe(1);
    // The request that loaded m2 waited for the load: that wait is its queue time.
    const m2 = engine.server.modelStatistics('m2')[0]!;
    expect(m2.inference_stats.queue.count).toBe(1);
    expect(m2.inference_stats.queue.ns).toBeGreaterThan(1e6);
    const { json } = await httpJson(engine.httpPort, 'POST', '/v2/repository/index', {});
    expect((json as unknown as Array<{ name: string; resident_bytes?: number }>).find((e) => e.name === 'm2')!.resident_bytes).toBe(cost);
    const metrics = await (await fetch(`http://127.0.0.1:${engine.metricsPort}/metrics`)).text();
    expect(metrics).toMatch(/nv_model_eviction_count 1/);
    expect(metrics).toMatch(new RegExp(`nv_model_resident_bytes\\{model="m2"\\} ${cost}`));
    expect(metrics).toMatch(/nv_model_load_count 4/);
  });

  it('moves capacity with the traffic: budget never exceeded, the hot model stays, no request fails', async () => {
    const s = sampler();
    const evictionsBefore = budget().evictions;
    let hotRunning = true;
    let failures = 0;
    let hotLoads = 0;
    const hotWatch = setInterval(() => {
      if (state('m0').state !== 'READY') hotLoads++;
    }, 2);
    // m0 is hot throughout; the cold traffic moves m1 -> m2 -> m1 -> m2, and nothing else fits beside them.
    const hot = async () => {
      while (hotRunning) await infer('m0').catch(() => failures++);
    };
    const hots = [hot(), hot()];
    for (const m of ['m1', 'm2', 'm1', 'm2']) {
      await Promise.all(Array.from({ length: 6 }, () => infer(m).catch(() => failures++)));
    }
    // And bursts over every model at once: eviction races with requests in flight.
    await Promise.all(Array.from({ length: 30 }, (_, i) => infer(['m0', 'm1', 'm2'][i % 3]!).catch(() => failures++)));
    hotRunning = false;
    await Promise.all(hots);
    clearInterval(hotWatch);
    expect(s.stop()).toBeLessThanOrEqual(budget().budgetBytes);
    expect(failures).toBe(0);
    expect(budget().evictions - evictionsBefore).toBeGreaterThanOrEqual(3);
    expect(hotLoads).toBe(0);
    expect(state('pinned').state).toBe('READY');
  });

  it('refuses a load that cannot fit, outside on-demand mode, without evicting', async () => {
    const e = await startTestEngine({ modelRepository: repo, controlMode: 'explicit', modelMemoryBudget: Math.floor(cost * 1.5) });
    try {
      await e.server.loadModel('m0');
      await expect(e.server.loadModel('m1')).rejects.toThrow(/memory budget: model 'm1' needs/);
      expect(e.engine.budget!.status()).toMatchObject({ usedBytes: cost, evictions: 0, loadFailures: 1 });
    } finally {
      await e.stop();
    }
  });
});
