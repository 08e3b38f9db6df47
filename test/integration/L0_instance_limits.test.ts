// instance_group.count bounded at load (engine/repository/instance-limits.ts,
// issue 41): a real engine in explicit mode, copies of the bundled recommender
// (an onnxruntime model: one worker thread and session per instance) asking
// for too many instances per model, past the total, and past the memory
// budget. Each load is refused at once with a message naming the config file
// and field, nothing of it is created (thread count flat), and other models
// keep loading and serving.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { setQuiet } from '../../common/logger.ts';
import { BUNDLED_REPO, httpJson, removeDir, startTestEngine, tempRepo } from './helpers.ts';

let repo: string;
let engine: RunningEngine;
let budgeted: RunningEngine;

const SRC = 'product_recommender_model';
/** A copy of the recommender named `name` with instance_group count `count`. */
function model(name: string, count: number): void {
  const dir = path.join(repo, name);
  fs.cpSync(path.join(BUNDLED_REPO, SRC), dir, { recursive: true });
  const cfg = fs
    .readFileSync(path.join(dir, 'config.pbtxt'), 'utf8')
    .replace(`name: "${SRC}"`, `name: "${name}"`)
    .replace('count: 1, kind: KIND_CPU', `count: ${count}, kind: KIND_CPU`);
  fs.writeFileSync(path.join(dir, 'config.pbtxt'), cfg);
}

const threads = () => fs.readdirSync('/proc/self/task').length;

beforeAll(async () => {
  setQuiet(true);
  repo = tempRepo('instance-limits');
  model('huge', 100_000);
  model('four_a', 4);
  model('four_b', 4);
  model('small', 1);
  model('twelve', 12);
  model('many', 160);
  engine = await startTestEngine({
    modelRepository: repo,
    controlMode: 'explicit',
    grpcPort: -1,
    metricsPort: -1,
    instanceLimits: { perModel: 8, total: 10 },
  });
  budgeted = await startTestEngine({
    modelRepository: repo,
    controlMode: 'explicit',
    grpcPort: -1,
    metricsPort: -1,
    modelMemoryBudget: 1024 * 1024 * 1024,
    instanceLimits: { perModel: 200, total: 400 },
  });
}, 120_000);

afterAll(async () => {
  await engine?.stop();
  await budgeted?.stop();
  removeDir(repo);
});

const load = (e: RunningEngine, name: string) => httpJson(e.httpPort, 'POST', `/v2/repository/models/${name}/load`);
const ready = async (e: RunningEngine, name: string) => (await fetch(`http://127.0.0.1:${e.httpPort}/v2/models/${name}/ready`)).status;

describe('L0_instance_limits', () => {
  it('a count over the per-model maximum is refused at once, naming the model and field; nothing is created', async () => {
    const before = threads();
    const t0 = Date.now();
    const r = await load(engine, 'huge');
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(r.status).toBe(400);
    expect(r.json.error).toBe(
      "failed to load 'huge': huge/config.pbtxt: instance_group[0].count: 100000 instances is over the maximum of 8 per model (--max-instances-per-model)",
    );
    expect(threads()).toBeLessThanOrEqual(before + 2);
    expect(await ready(engine, 'huge')).toBe(400);
    const idx = await httpJson(engine.httpPort, 'POST', '/v2/repository/index');
    const row = (idx.json as unknown as { name: string; state: string; reason: string }[]).find((m) => m.name === 'huge')!;
    expect(row.state).toBe('UNAVAILABLE');
    expect(row.reason).toContain('instance_group[0].count');
  });

  it('counts past the total of all loaded models are refused; the others keep loading and serving', async () => {
    expect((await load(engine, 'four_a')).status).toBe(200);
    expect((await load(engine, 'four_b')).status).toBe(200); // 8 of 10
    const r = await load(engine, 'twelve');
    expect(r.status).toBe(400);
    expect(r.json.error).toContain('twelve/config.pbtxt: instance_group[0].count: 12 instances is over the maximum of 8 per model');
    const again = await load(engine, 'four_a'); // a reload of four_a does not count its own instances twice
    expect(again.status).toBe(200);
    const past = await load(engine, 'small'); // 9 of 10: fits
    expect(past.status).toBe(200);
    model('three', 3);
    const over = await load(engine, 'three');
    expect(over.status).toBe(400);
    expect(over.json.error).toBe(
      "failed to load 'three': three/config.pbtxt: instance_group[0].count: 3 instances with the 9 other models hold is over the maximum of 10 in all (--max-instances-total)",
    );
    for (const m of ['four_a', 'four_b', 'small']) expect(await ready(engine, m), m).toBe(200);
    expect((await httpJson(engine.httpPort, 'POST', '/v2/repository/models/four_b/unload')).status).toBe(200);
    expect((await load(engine, 'three')).status).toBe(200); // room again
  });

  it('with a memory budget, counts whose instances cannot fit it are refused', async () => {
    const r = await load(budgeted, 'many'); // 160 × (8 MiB floor + the model file) > 1 GiB
    expect(r.status).toBe(400);
    expect(r.json.error).toMatch(
      /^failed to load 'many': many\/config\.pbtxt: instance_group\[0\]\.count: 160 instances need at least \d+ MiB .* over the model memory budget of 1024 MiB \(--model-memory-budget\)$/,
    );
    expect((await load(budgeted, 'four_a')).status).toBe(200);
  });
});
