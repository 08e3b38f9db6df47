// The memory budget against the process's real RSS, not its own books: four
// copies of the bundled encoder (two instances each, batches of 16) and a
// budget worth 2.75 of them, measured the same way (one encoder's RSS above
// the empty engine once warm). Traffic rotates over the four; at the end at
// most 2-3 are resident and the engine's model memory (its RSS minus the
// empty engine's) is within 1.1x the budget. Before the budget charged the
// steady state (warmup at load, growth while running), all four stayed
// resident at 1.43x. The engine runs as its own process so RSS is its alone.
import { afterAll, describe, expect, it } from 'vitest';
import { stopAll, stopChild } from '../bench/processes.ts';
import { encoderRepo, inferEncoder, mib, repoIndex, rssBytes, sleep, spawnEngine } from '../bench/sharing-support.ts';
import { removeDir } from './helpers.ts';

const NAMES = ['e0', 'e1', 'e2', 'e3'];
const repo = encoderRepo(NAMES);

afterAll(async () => {
  await stopAll();
  removeDir(repo);
});

/** Two closed-loop clients, `n` batches of 16 each. */
const drive = (port: number, model: string, n: number) =>
  Promise.all(
    [0, 1].map(async () => {
      for (let i = 0; i < n; i++) await inferEncoder(port, model, 16);
    }),
  );

describe('memory budget by RSS', () => {
  it('four encoders under a budget of 2.75 of them end with 2-3 resident and model memory within 1.1x the budget', async () => {
    // One encoder, warm, without a budget: what it really takes.
    let e = await spawnEngine(repo);
    await sleep(1000);
    let empty = rssBytes(e.pid);
    await drive(e.http, 'e0', 4);
    await sleep(700);
    const one = rssBytes(e.pid) - empty;
    await stopChild(e.child);

    // 2.75 of them: the engine charges a model its steady state as it measures it (load, warm-up, growth
    // while running), which read up to 1.25x this single RSS sample on a loaded host; at 2.5 that left room
    // for one encoder in some runs (a Node 24 run and a Node 20 one on 2026-12-02), at 2.75 two fit up to
    // a charge of 1.375x. Three fit only below 0.92x, which the books never charged.
    const budget = Math.round(2.75 * one);
    e = await spawnEngine(repo, [`--model-memory-budget=${budget}`]);
    await sleep(1000);
    empty = rssBytes(e.pid);
    for (const m of ['e0', 'e1', 'e2', 'e3', 'e0', 'e2']) await drive(e.http, m, 3);
    await sleep(1500); // a few monitor passes
    const index = await repoIndex(e.http);
    const resident = index.filter((x) => x.state === 'READY');
    const modelMemory = rssBytes(e.pid) - empty;
    const summary = `one encoder ${mib(one)} MiB, budget ${mib(budget)} MiB, model memory ${mib(modelMemory)} MiB (${(modelMemory / budget).toFixed(2)}x), resident ${resident.map((x) => x.name).join(',')}`;
    process.stdout.write(`L0_budget_rss: ${summary}\n`);
    expect(resident.length, summary).toBeGreaterThanOrEqual(2);
    expect(resident.length, summary).toBeLessThanOrEqual(3);
    expect(modelMemory, summary).toBeLessThanOrEqual(1.1 * budget);
    // The books show why: evictions, cold loads, and the steady charge above the charge at load.
    expect(index.reduce((a, x) => a + (x.evicted ?? 0), 0)).toBeGreaterThanOrEqual(2);
    expect(index.find((x) => x.name === 'e0')!.cold_loads).toBe(2);
    for (const r of resident) expect(r.resident_bytes!).toBeGreaterThanOrEqual(r.load_bytes!);
    const metrics = await (await fetch(`http://127.0.0.1:${e.metrics}/metrics`)).text();
    expect(metrics).toMatch(/nv_model_cold_load_count\{model="e0"\} 2/);
    await stopChild(e.child);
  }, 600_000);
});
