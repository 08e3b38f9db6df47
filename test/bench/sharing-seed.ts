// `npm run bench:sharing -- --scenario seed`: the project's own problem,
// reproduced under a real memory limit (cgroup v1, /sys/fs/cgroup/memory; needs
// root). Three encoder models A, B, C sized so two fit in the memory given.
// B and C take one call each and go idle; A gets a spike (closed loop, batches
// of 16); later B wakes. (a) One engine process per model, each in its own
// cgroup limited to a third of the total. (b) One engine in one cgroup with the
// whole total and --model-memory-budget. Prints a Markdown table.
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { removeTempDir, stopChild } from './processes.ts';
import { encoderRepo, inferEncoder, mib, pct, repoIndex, rssBytes, sleep, spawnEngine, type EngineProc } from './sharing-support.ts';

const CG = '/sys/fs/cgroup/memory';

export interface SeedOptions {
  totalMiB: number;
  budgetMiB: number;
  spikeClients: number;
  spikeMs: number;
  wakeAtMs: number;
}

function cgroup(name: string, limitBytes: number): { procs: string; peak(): number; oomKills(): number; remove(): void } {
  const dir = path.join(CG, `bench-seed-${process.pid}-${name}`);
  if (!existsSync(dir)) mkdirSync(dir);
  writeFileSync(path.join(dir, 'memory.limit_in_bytes'), String(limitBytes));
  return {
    procs: path.join(dir, 'cgroup.procs'),
    peak: () => Number(readFileSync(path.join(dir, 'memory.max_usage_in_bytes'), 'utf8')),
    oomKills: () => Number(/oom_kill (\d+)/.exec(readFileSync(path.join(dir, 'memory.oom_control'), 'utf8'))?.[1] ?? 0),
    remove: () => {
      try {
        rmdirSync(dir);
      } catch {
        // a process still in it: left for the next run's cleanup
      }
    },
  };
}

interface Calls {
  lat: number[];
  failed: number;
  errors: Map<string, number>;
}

const calls = (): Calls => ({ lat: [], failed: 0, errors: new Map() });

async function one(c: Calls, port: () => number, model: string, batch: number): Promise<number | undefined> {
  const s = performance.now();
  try {
    await inferEncoder(port(), model, batch, 60_000);
    const ms = performance.now() - s;
    c.lat.push(ms);
    return ms;
  } catch (err) {
    c.failed++;
    const kind = String((err as Error).message)
      .replace(/\d+/g, 'N')
      .slice(0, 60);
    c.errors.set(kind, (c.errors.get(kind) ?? 0) + 1);
    await sleep(50); // a refused connection fails at once: do not spin
    return undefined;
  }
}

/** The timeline, the same for both modes: warm B then C, spike A, wake B at wakeAtMs. `port(m)` routes a model. */
async function timeline(o: SeedOptions, port: (m: string) => number, t0: number, onKill: () => number | undefined) {
  const a = calls();
  const b = calls();
  await one(b, () => port('B'), 'B', 1);
  await one(calls(), () => port('C'), 'C', 1);
  const until = performance.now() + o.spikeMs;
  let bWait: number | undefined;
  const spike = Array.from({ length: o.spikeClients }, async () => {
    while (performance.now() < until) await one(a, () => port('A'), 'A', 16);
  });
  const wake = (async () => {
    await sleep(o.wakeAtMs);
    bWait = await one(b, () => port('B'), 'B', 1);
    while (performance.now() < until) await one(b, () => port('B'), 'B', 1);
  })();
  await Promise.all([...spike, wake]);
  return { a, b, bWait, killedAtMs: onKill(), elapsed: performance.now() - t0 };
}

const MiB = 2 ** 20;

async function separate(o: SeedOptions) {
  const third = Math.floor((o.totalMiB * MiB) / 3);
  const procs: Record<string, { e: EngineProc; cg: ReturnType<typeof cgroup>; repo: string; peakRss: number }> = {};
  for (const m of ['A', 'B', 'C']) {
    const repo = encoderRepo([m]);
    const cg = cgroup(m, third);
    procs[m] = { e: await spawnEngine(repo, [], { cgroupProcs: cg.procs }), cg, repo, peakRss: 0 };
  }
  const t0 = performance.now();
  let killedAt: number | undefined;
  const watch = setInterval(() => {
    for (const p of Object.values(procs)) {
      try {
        p.peakRss = Math.max(p.peakRss, rssBytes(p.e.pid));
      } catch {
        // gone
      }
    }
    const a = procs.A!.e.child.proc;
    if (killedAt === undefined && a.signalCode) killedAt = performance.now() - t0;
  }, 20);
  try {
    const r = await timeline(
      o,
      (m) => procs[m]!.e.http,
      t0,
      () => killedAt,
    );
    const status = Object.fromEntries(
      Object.entries(procs).map(([m, p]) => [
        m,
        { signal: p.e.child.proc.signalCode, oomKills: p.cg.oomKills(), peak: p.cg.peak(), peakRss: p.peakRss },
      ]),
    );
    return { ...r, status, limitEach: third };
  } finally {
    clearInterval(watch);
    for (const p of Object.values(procs)) {
      await stopChild(p.e.child, 5000);
      p.cg.remove();
      removeTempDir(p.repo);
    }
  }
}

async function shared(o: SeedOptions) {
  const repo = encoderRepo(['A', 'B', 'C']);
  const cg = cgroup('one', o.totalMiB * MiB);
  const e = await spawnEngine(repo, [`--model-memory-budget=${o.budgetMiB * MiB}`], { cgroupProcs: cg.procs });
  let peakRss = 0;
  const watch = setInterval(() => {
    try {
      peakRss = Math.max(peakRss, rssBytes(e.pid));
    } catch {
      // gone
    }
  }, 20);
  const t0 = performance.now();
  try {
    const r = await timeline(
      o,
      () => e.http,
      t0,
      () => (e.child.proc.signalCode ? performance.now() - t0 : undefined),
    );
    const alive = e.child.proc.exitCode === null && e.child.proc.signalCode === null;
    const index = alive ? await repoIndex(e.http) : [];
    return { ...r, alive, oomKills: cg.oomKills(), peak: cg.peak(), peakRss, index };
  } finally {
    clearInterval(watch);
    await stopChild(e.child, 5000);
    cg.remove();
    removeTempDir(repo);
  }
}

export async function seedScenario(o: SeedOptions): Promise<string> {
  const load0 = os.loadavg()[0]!;
  const sep = await separate(o);
  const one = await shared(o);
  const load1 = os.loadavg()[0]!;
  const f = (x: number | undefined, d = 0) => (x === undefined || Number.isNaN(x) ? '–' : x.toFixed(d));
  const errs = (c: Calls) => [...c.errors.entries()].map(([k, n]) => `${n}× ${k}`).join('; ') || 'none';
  const sepA = sep.status.A!;
  const rows = [
    `| (a) one process per model, ${mib(sep.limitEach)} MiB each | ${sep.a.failed} of ${sep.a.lat.length + sep.a.failed} | ${sep.b.failed} | ${f(pct(sep.a.lat, 50))} / ${f(pct(sep.a.lat, 95))} | A ${mib(sepA.peakRss)} MiB, B ${mib(sep.status.B!.peakRss)}, C ${mib(sep.status.C!.peakRss)} (cgroup peak A ${mib(sepA.peak)}) | ${f(sep.bWait)} | A: ${sepA.signal ? `killed (${sepA.signal}, ${sepA.oomKills} OOM kill) at ${f((sep.killedAtMs ?? 0) / 1000, 1)} s` : 'alive'} |`,
    `| (b) one engine, ${o.totalMiB} MiB, budget ${o.budgetMiB} MiB | ${one.a.failed} of ${one.a.lat.length + one.a.failed} | ${one.b.failed} | ${f(pct(one.a.lat, 50))} / ${f(pct(one.a.lat, 95))} | ${mib(one.peakRss)} MiB (cgroup peak ${mib(one.peak)}) | ${f(one.bWait)} | engine ${one.alive ? 'alive' : 'killed'}, ${one.oomKills} OOM kills |`,
  ];
  const books = one.index.map(
    (x) =>
      `${x.name}: ${x.state}, ${x.cold_loads ?? 0} cold loads (${x.cold_load_ms_total ?? 0} ms), evicted ${x.evicted ?? 0}×, caused ${x.evictions_caused ?? 0}${x.resident_bytes ? `, charged ${mib(x.resident_bytes)} MiB (${mib(x.load_bytes ?? 0)} at load)` : ''}`,
  );
  return [
    `Seed scenario: A spiked by ${o.spikeClients} closed-loop clients at batch 16 for ${o.spikeMs / 1000} s, B and C one call each then idle, B wakes at ${o.wakeAtMs / 1000} s (batch 1, closed loop). Total memory ${o.totalMiB} MiB (cgroup v1 limit). ${os.availableParallelism()} cores, load average ${load0.toFixed(2)} before, ${load1.toFixed(2)} after.`,
    '',
    '| setup | A failed calls | B failed calls | A p50 / p95 ms | peak RSS vs limit | B first call after waking, ms | killed |',
    '|---|---|---|---|---|---|---|',
    ...rows,
    '',
    `What A's clients saw in (a): ${errs(sep.a)}. B in (a): ${errs(sep.b)}. In (b): A ${errs(one.a)}; B ${errs(one.b)}.`,
    `The engine's books at the end of (b): ${books.join('; ')}.`,
  ].join('\n');
}
