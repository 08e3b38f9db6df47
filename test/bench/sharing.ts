// `npm run bench:sharing [-- --phase-ms=N]`: traffic moving between models for sharing
// one machine. Two ONNX models A and B (one ONNX Runtime worker each when
// static; 1..2 when adaptive); closed-loop traffic on the hot model moves
// A -> B -> A. The static and the adaptive engine run the same scenario one
// after the other in this one process (never at once), then the response
// cache's hit and miss latencies. Prints a Markdown table; CPU time is this
// process's (all threads), robust to other work on the machine.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startEngine, type RunningEngine } from '../../engine/server/server.ts';
import { buildSlowModel } from '../fixtures/test-models.ts';

const { values } = parseArgs({
  options: {
    'phase-ms': { type: 'string', default: '3000' },
    clients: { type: 'string', default: '4' },
    matmuls: { type: 'string', default: '6' },
    reps: { type: 'string', default: '3' },
    // --scenario seed (sharing-seed.ts) and cold (sharing-cold.ts); none: the adaptive-instances and cache run below.
    scenario: { type: 'string' },
    'total-mib': { type: 'string', default: '1000' },
    'budget-mib': { type: 'string', default: '740' },
    'spike-clients': { type: 'string', default: '4' },
    'spike-ms': { type: 'string', default: '30000' },
    'wake-ms': { type: 'string', default: '15000' },
    busy: { type: 'string', default: '0' },
  },
});
const PHASE_MS = Number(values['phase-ms']);
const CLIENTS = Number(values.clients);

const config = (name: string, adaptive: boolean, cache = false) => `name: "${name}"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "x", data_type: TYPE_FP32, dims: [ -1, 1 ] } ]
output [ { name: "y", data_type: TYPE_FP32, dims: [ -1, 1 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
parameters { key: "intra_op_thread_count" value: { string_value: "1" } }
${adaptive ? 'parameters { key: "max_instance_count" value: { string_value: "2" } }' : ''}
${cache ? 'response_cache { enable: true }' : ''}
`;

function repo(adaptive: boolean, cache = false): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), `bench-sharing-${process.pid}-`));
  const onnx = buildSlowModel(Number(values.matmuls));
  for (const m of ['A', 'B']) {
    mkdirSync(path.join(dir, m, '1'), { recursive: true });
    writeFileSync(path.join(dir, m, 'config.pbtxt'), config(m, adaptive, cache));
    writeFileSync(path.join(dir, m, '1', 'model.onnx'), onnx);
  }
  return dir;
}

const input = (v: number) => [{ name: 'x', datatype: 'FP32' as const, shape: [1, 1], data: new Uint8Array(new Float32Array([v]).buffer) }];
const infer = (e: RunningEngine, model: string, v = 0.5) =>
  e.server.infer({ modelName: model, inputs: input(v), outputs: [], parameters: {} });
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]! : NaN;
};

/** CLIENTS closed-loop clients on `model` for `ms`: throughput, p50/p95 latency, CPU ms per request. */
async function phase(e: RunningEngine, model: string, ms: number) {
  const lat: number[] = [];
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const until = t0 + ms;
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (performance.now() < until) {
        const s = performance.now();
        await infer(e, model);
        lat.push(performance.now() - s);
      }
    }),
  );
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return {
    n: lat.length,
    rps: (lat.length / wall) * 1000,
    p50: pct(lat, 50),
    p95: pct(lat, 95),
    cpuMsPerReq: (cpu.user + cpu.system) / 1000 / lat.length,
  };
}

type Mode = 'static' | 'adaptive' | 'adaptive, idle-core check off';
const MODES: Mode[] = ['static', 'adaptive', 'adaptive, idle-core check off'];
const REPS = Number(values.reps);

async function scenario(mode: Mode) {
  const adaptive = mode !== 'static';
  const dir = repo(adaptive);
  const e = await startEngine({
    modelRepository: dir,
    grpcPort: -1,
    httpPort: -1,
    metricsPort: -1,
    adaptiveInstances: adaptive,
    adaptiveWindowMs: 250,
    adaptivePolicy: mode === 'adaptive' ? undefined : { minIdleCores: 0 },
  });
  try {
    await infer(e, 'A');
    await infer(e, 'B');
    const out = [];
    for (const m of ['A', 'B', 'A'])
      out.push({ model: m, ...(await phase(e, m, PHASE_MS)), instances: e.engine.repository.readyVersion(m)!.pool!.instances.length });
    return { mode, phases: out, changes: e.engine.autoscaler?.history.length ?? 0 };
  } finally {
    await e.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function cacheRows() {
  const dir = repo(false, true);
  const e = await startEngine({
    modelRepository: dir,
    grpcPort: -1,
    httpPort: -1,
    metricsPort: -1,
    cacheConfig: { kind: 'local', size: 64 << 20 },
  });
  try {
    const miss: number[] = [];
    const hit: number[] = [];
    for (let i = 0; i < 200; i++) {
      let s = performance.now();
      await infer(e, 'A', i + 1); // new input: a miss
      miss.push(performance.now() - s);
      s = performance.now();
      await infer(e, 'A', i + 1); // same input again: a hit
      hit.push(performance.now() - s);
    }
    const st = e.server.modelStatistics('A')[0]!.inference_stats;
    return {
      missP50: pct(miss, 50),
      missP95: pct(miss, 95),
      hitP50: pct(hit, 50),
      hitP95: pct(hit, 95),
      hits: st.cache_hit.count,
      misses: st.cache_miss.count,
    };
  } finally {
    await e.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const load0 = os.loadavg()[0]!;
  // Modes take turns, REPS times over, and each cell is the median: load from other work drifts between turns.
  const all: Array<Awaited<ReturnType<typeof scenario>>> = [];
  for (let rep = 0; rep < REPS; rep++) for (const mode of MODES) all.push(await scenario(mode));
  const med = (xs: number[]) => pct(xs, 50);
  const runs = MODES.map((mode) => {
    const rs = all.filter((r) => r.mode === mode);
    return {
      mode,
      changes: med(rs.map((r) => r.changes)),
      phases: rs[0]!.phases.map((p, i) => ({
        model: p.model,
        rps: med(rs.map((r) => r.phases[i]!.rps)),
        p95: med(rs.map((r) => r.phases[i]!.p95)),
        cpuMsPerReq: med(rs.map((r) => r.phases[i]!.cpuMsPerReq)),
        instances: med(rs.map((r) => r.phases[i]!.instances)),
      })),
    };
  });
  const cache = await cacheRows();
  const f = (x: number, d = 1) => x.toFixed(d);
  const stat = runs[0]!;
  const lines = [
    `Traffic on the hot model moves A -> B -> A, ${CLIENTS} closed-loop clients, ${PHASE_MS} ms per phase, the engines taking turns ${REPS} times (medians shown); ${os.availableParallelism()} cores, load average ${f(load0, 2)} at start (other work shared the cores).`,
    '',
    '| phase (hot model) | engine | req/s | vs static | p95 ms | CPU ms/req | hot model instances at end | instance changes per run |',
    '|---|---|---|---|---|---|---|---|',
    ...stat.phases.flatMap((s, i) =>
      runs.map((r) => {
        const p = r.phases[i]!;
        return `| ${i + 1}: ${s.model} | ${r.mode} | ${f(p.rps)} | ${f(p.rps / s.rps, 2)}× | ${f(p.p95)} | ${f(p.cpuMsPerReq, 2)} | ${p.instances} | ${r.changes} |`;
      }),
    ),
    '',
    '| response cache (local) | p50 ms | p95 ms |',
    '|---|---|---|',
    `| miss (model runs) | ${f(cache.missP50, 3)} | ${f(cache.missP95, 3)} |`,
    `| hit | ${f(cache.hitP50, 3)} | ${f(cache.hitP95, 3)} |`,
    '',
    `(${cache.hits} hits, ${cache.misses} misses in statistics.)`,
  ];
  process.stdout.write(lines.join('\n') + '\n');
}

async function entry(): Promise<void> {
  if (values.scenario === 'seed') {
    const { seedScenario } = await import('./sharing-seed.ts');
    const out = await seedScenario({
      totalMiB: Number(values['total-mib']),
      budgetMiB: Number(values['budget-mib']),
      spikeClients: Number(values['spike-clients']),
      spikeMs: Number(values['spike-ms']),
      wakeAtMs: Number(values['wake-ms']),
    });
    process.stdout.write(out + '\n');
  } else if (values.scenario === 'cold') {
    const { coldScenario } = await import('./sharing-cold.ts');
    process.stdout.write((await coldScenario({ busy: Number(values.busy) })) + '\n');
  } else if (values.scenario) throw new Error(`--scenario: expected seed or cold, got '${values.scenario}'`);
  else await main();
  process.exit(0);
}

entry().catch((err) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});
