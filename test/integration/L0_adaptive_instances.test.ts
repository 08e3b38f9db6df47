// Adaptive instance counts on the real engine: a model whose requests queue
// gains an instance (a second ONNX Runtime worker) up to its
// max_instance_count, serves on it, and gives it back once idle; a model
// without the parameter, and any model without --adaptive-instances, keeps
// its count.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { buildSlowModel } from '../fixtures/test-models.ts';
import { removeDir, startTestEngine, tempRepo } from './helpers.ts';

const config = (name: string, max?: number) => `name: "${name}"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "x", data_type: TYPE_FP32, dims: [ -1, 1 ] } ]
output [ { name: "y", data_type: TYPE_FP32, dims: [ -1, 1 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
${max ? `parameters { key: "max_instance_count" value: { string_value: "${max}" } }` : ''}
`;

let repo: string;
const engines: RunningEngine[] = [];
afterAll(async () => {
  for (const e of engines) await e.stop();
  removeDir(repo);
});

function writeRepo(): string {
  const r = tempRepo('l0-adaptive');
  for (const [name, max] of [
    ['grows', 2],
    ['fixed', undefined],
  ] as const) {
    mkdirSync(path.join(r, name, '1'), { recursive: true });
    writeFileSync(path.join(r, name, 'config.pbtxt'), config(name, max));
    writeFileSync(path.join(r, name, '1', 'model.onnx'), buildSlowModel(6));
  }
  return r;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function flood(e: RunningEngine, model: string, ms: number): Promise<number> {
  const until = performance.now() + ms;
  let n = 0;
  const worker = async () => {
    while (performance.now() < until) {
      await e.server.infer({
        modelName: model,
        inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 1], data: new Uint8Array(new Float32Array([0.5]).buffer) }],
        outputs: [],
        parameters: {},
      });
      n++;
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  return n;
}

describe('adaptive instances', () => {
  it('adds an instance to a queueing model and removes it when idle; others keep their count', async () => {
    repo = writeRepo();
    // The idle-core check is off here: the mechanism is under test, on a host other suites keep busy.
    const e = await startTestEngine({
      modelRepository: repo,
      adaptiveInstances: true,
      adaptiveWindowMs: 100,
      adaptivePolicy: { minIdleCores: 0 },
    });
    engines.push(e);
    const pool = (m: string) => e.engine.repository.readyVersion(m)!.pool!.instances.length;
    await flood(e, 'grows', 1500);
    const history = e.engine.autoscaler!.history;
    expect(history.find((h) => h.model === 'grows' && h.delta === 1)).toBeDefined();
    expect(history.every((h) => h.model === 'grows' && h.instances <= 2 && h.instances >= 1)).toBe(true);
    // Traffic moves to the fixed model: it keeps its count, and the idle one gives its instance back.
    await flood(e, 'fixed', 800);
    expect(pool('fixed')).toBe(1);
    for (let i = 0; i < 40 && pool('grows') > 1; i++) await sleep(50);
    expect(pool('grows')).toBe(1);
    expect(history.at(-1)).toMatchObject({ model: 'grows', delta: -1, instances: 1 });
    // Still serving after the change.
    expect(await flood(e, 'grows', 100)).toBeGreaterThan(0);
  });

  it('rate-limits the instances it adds like the configured ones', async () => {
    const e = await startTestEngine({
      modelRepository: repo,
      adaptiveInstances: true,
      adaptiveWindowMs: 100,
      adaptivePolicy: { minIdleCores: 0 },
      rateLimit: 'execution_count',
    });
    engines.push(e);
    const registered = e.engine.rateLimiter!.size();
    await flood(e, 'grows', 1200);
    const added = e.engine.autoscaler!.history.filter((h) => h.delta === 1).length;
    expect(added).toBeGreaterThan(0);
    const removed = e.engine.autoscaler!.history.filter((h) => h.delta === -1).length;
    expect(e.engine.rateLimiter!.size()).toBe(registered + added - removed);
  });

  it('is off by default', async () => {
    const e = await startTestEngine({ modelRepository: repo });
    engines.push(e);
    await flood(e, 'grows', 600);
    expect(e.engine.autoscaler).toBeUndefined();
    expect(e.engine.repository.readyVersion('grows')!.pool!.instances.length).toBe(1);
  });
});
