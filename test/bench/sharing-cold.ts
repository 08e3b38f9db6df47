// `npm run bench:sharing -- --scenario cold [--busy=N]`: cold loads under the
// memory budget, on a quiet CPU and with N busy-loop processes beside it.
// (1) Cold load to first answer of the small recommender (1 instance) and the
// encoder (2 instances), three times each (unload between), and where the
// time went (waiting for room, the backend starting its instances, warmup).
// (2) Thrash: 4 closed-loop clients rotating over 5 copies of the recommender
// (2 instances each) with room for 2.5 of them. Prints Markdown.
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, removeTempDir, stopChild } from './processes.ts';
import { encoderRepo, inferEncoder, pct, repoIndex, sleep, spawnEngine, type IndexEntry } from './sharing-support.ts';

const REC = path.join(ROOT, 'model_repository', 'product_recommender_model');

function recRepo(names: string[], instances: number): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sharing-rec-'));
  const cfg = readFileSync(path.join(REC, 'config.pbtxt'), 'utf8');
  for (const n of names) {
    mkdirSync(path.join(dir, n, '1'), { recursive: true });
    copyFileSync(path.join(REC, '1', 'model.onnx'), path.join(dir, n, '1', 'model.onnx'));
    writeFileSync(
      path.join(dir, n, 'config.pbtxt'),
      cfg.replace(/name: "[^"]+"/, `name: "${n}"`).replace(/count: \d+/, `count: ${instances}`),
    );
  }
  return dir;
}

async function inferRec(port: number, model: string): Promise<void> {
  const r = await fetch(`http://127.0.0.1:${port}/v2/models/${model}/infer`, {
    method: 'POST',
    body: JSON.stringify({ inputs: [{ name: 'user_features', datatype: 'FP32', shape: [1, 64], data: new Array(64).fill(0.5) }] }),
    signal: AbortSignal.timeout(120_000),
  });
  if (!r.ok) throw new Error(`HTTP ${r.status}: ${(await r.text()).slice(0, 200)}`);
  await r.arrayBuffer();
}

const unload = (port: number, m: string) =>
  fetch(`http://127.0.0.1:${port}/v2/repository/models/${m}/unload`, { method: 'POST', body: '{}' });

async function coldLoads(kind: 'recommender' | 'encoder') {
  const repo = kind === 'encoder' ? encoderRepo(['m']) : recRepo(['m'], 1);
  const e = await spawnEngine(repo, [`--model-memory-budget=${8 * 2 ** 30}`]);
  const ms: number[] = [];
  try {
    for (let i = 0; i < 3; i++) {
      const s = performance.now();
      await (kind === 'encoder' ? inferEncoder(e.http, 'm', 1) : inferRec(e.http, 'm'));
      ms.push(performance.now() - s);
      await unload(e.http, 'm');
      await sleep(300);
    }
    const x = (await repoIndex(e.http)).find((m) => m.name === 'm')!;
    return { ms, x };
  } finally {
    await stopChild(e.child, 5000);
    removeTempDir(repo);
  }
}

async function thrash() {
  const names = ['r0', 'r1', 'r2', 'r3', 'r4'];
  const repo = recRepo(names, 2);
  // One copy's steady charge, measured by the engine the same way as under the budget.
  let e = await spawnEngine(repo, [`--model-memory-budget=${8 * 2 ** 30}`]);
  for (let i = 0; i < 20; i++) await inferRec(e.http, 'r0');
  await sleep(1200);
  const one = (await repoIndex(e.http)).find((m) => m.name === 'r0')!.resident_bytes!;
  await stopChild(e.child, 5000);
  e = await spawnEngine(repo, [`--model-memory-budget=${Math.round(2.5 * one)}`]);
  const lat: number[] = [];
  let failed = 0;
  const until = performance.now() + 15_000;
  try {
    await Promise.all(
      [0, 1, 2, 3].map(async (c) => {
        for (let k = c; performance.now() < until; k++) {
          const s = performance.now();
          try {
            await inferRec(e.http, names[k % names.length]!);
            lat.push(performance.now() - s);
          } catch {
            failed++;
          }
        }
      }),
    );
    const idx = await repoIndex(e.http);
    return { lat, failed, one, idx };
  } finally {
    await stopChild(e.child, 5000);
    removeTempDir(repo);
  }
}

const sum = (idx: IndexEntry[], k: keyof IndexEntry) => idx.reduce((a, x) => a + Number(x[k] ?? 0), 0);

async function measure(busy: number): Promise<string[]> {
  const burners: ChildProcess[] = Array.from({ length: busy }, () => spawn(process.execPath, ['-e', 'for(;;){}'], { stdio: 'ignore' }));
  try {
    await sleep(busy ? 500 : 0);
    const load = os.loadavg()[0]!.toFixed(2);
    const rows: string[] = [];
    for (const kind of ['recommender', 'encoder'] as const) {
      const { ms, x } = await coldLoads(kind);
      const n = x.cold_loads || 1;
      rows.push(
        `| cold load to first answer, ${kind} | ${busy ? `${busy} busy loops` : 'quiet'} (load ${load}) | ${ms.map((v) => v.toFixed(0)).join(', ')} ms | room ${((x.cold_load_room_ms_total ?? 0) / n).toFixed(0)} ms, backend ${((x.cold_load_backend_ms_total ?? 0) / n).toFixed(0)} ms, warmup ${((x.cold_load_warmup_ms_total ?? 0) / n).toFixed(0)} ms (means) |`,
      );
    }
    const t = await thrash();
    const cold = sum(t.idx, 'cold_loads');
    rows.push(
      `| thrash: 4 clients over 5 recommenders (2 instances each), room for 2.5 | ${busy ? `${busy} busy loops` : 'quiet'} (load ${os.loadavg()[0]!.toFixed(2)}) | p50 ${pct(t.lat, 50).toFixed(0)} / p95 ${pct(t.lat, 95).toFixed(0)} / max ${Math.max(...t.lat).toFixed(0)} ms, ${t.lat.length} calls, ${t.failed} failed | ${cold} cold loads, ${sum(t.idx, 'evicted')} evictions; per cold load: room ${(sum(t.idx, 'cold_load_room_ms_total') / cold).toFixed(0)} ms, backend ${(sum(t.idx, 'cold_load_backend_ms_total') / cold).toFixed(0)} ms, warmup ${(sum(t.idx, 'cold_load_warmup_ms_total') / cold).toFixed(0)} ms |`,
    );
    return rows;
  } finally {
    for (const b of burners) b.kill('SIGKILL');
  }
}

export async function coldScenario(o: { busy: number }): Promise<string> {
  const rows = [...(await measure(0)), ...(o.busy > 0 ? await measure(o.busy) : [])];
  return [
    `Cold loads under the memory budget, ${os.availableParallelism()} cores (${os.cpus()[0]?.model ?? 'unknown CPU'}); each row names the load average when it started.`,
    '',
    '| what | CPU | latency | where the time went |',
    '|---|---|---|---|',
    ...rows,
  ].join('\n');
}
