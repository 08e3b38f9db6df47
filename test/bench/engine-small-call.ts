// `node --import tsx test/bench/engine-small-call.ts [--rounds=3] [--secs=4] [--only=c16m1] [--profile=DIR]`
// The engine's CPU per tiny inference (the recommender, 64 floats in, 100
// out) by request shape and connection pattern, h2load driving gRPC:
//  - shape: the minimal request (model, input, raw bytes) against the one the
//    gateway sends (plus an id, the model version, the requested output by
//    name), to find whether a gateway call costs the engine more (issue 25);
//  - pattern: 16 connections with one request in flight each (perf_analyzer's
//    sync mode, `h2load -c16 -m1`), 4 connections × 1, and 16 × 8 streams.
// Rounds interleave every row so a shared machine's noise falls on all alike.
// --only keeps the rows whose id (spaces removed) contains it; --profile runs
// the engine under --cpu-prof (profiles in DIR at exit).
// Prints a Markdown table with the machine and the load average.
import { writeFileSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { grpcFrame, which } from './c-clients.ts';
import { cpuSeconds, stopAll } from './processes.ts';
import { BUNDLED_REPO, startEngineProc } from './services.ts';
import { h2load, ROWS, smallBodies } from './engine-small-rows.ts';

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { rounds: { type: 'string', default: '3' }, secs: { type: 'string', default: '4' }, only: { type: 'string' }, profile: { type: 'string' } } });
  const [rounds, secs] = [Number(values.rounds), Number(values.secs)];
  if (!which('h2load')) throw new Error('h2load not installed (Debian nghttp2-client)');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'eng-small-'));
  const load0 = os.loadavg();
  const engine = await startEngineProc('engine-small', BUNDLED_REPO, ['--model-control-mode=explicit', '--load-model=product_recommender_model'], {}, 1,
    values.profile ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(values.profile)}`] : []);
  const files: Record<string, string> = {};
  for (const [k, req] of Object.entries(smallBodies())) writeFileSync((files[k] = path.join(dir, `${k}.bin`)), grpcFrame(req as never));
  const rows = ROWS.filter((r) => !values.only || r.id.replace(/ /g, '').includes(values.only));
  const samples = new Map<string, Array<{ rate: number; ms: number; mainMs: number }>>(rows.map((r) => [r.id, []]));
  const pid = engine.child.proc.pid!;
  try {
    await h2load(engine.grpcPort, files.minimal!, 16, 8, 2);
    for (let r = 0; r < rounds; r++) {
      for (const row of rows) {
        const c0 = cpuSeconds(pid);
        const res = await h2load(engine.grpcPort, files[row.body]!, row.c, row.m, secs);
        const c1 = cpuSeconds(pid);
        if (res.ok <= 0 || res.failed > 0) throw new Error(`${row.id}: ${res.ok} ok, ${res.failed} failed`);
        const s = { rate: res.ok / secs, ms: ((c1.total - c0.total) * 1000) / res.ok, mainMs: ((c1.main - c0.main) * 1000) / res.ok };
        samples.get(row.id)!.push(s);
        process.stderr.write(`round ${r + 1} ${row.id}: ${s.rate.toFixed(0)}/s, ${s.ms.toFixed(3)} ms CPU/call (main thread ${s.mainMs.toFixed(3)})\n`);
      }
    }
  } finally {
    await engine.stop();
    await stopAll();
  }
  const load1 = os.loadavg();
  const cpu = os.cpus();
  process.stdout.write([
    `machine: ${cpu.length} × ${cpu[0]?.model.trim()}, Node ${process.version}; load average before ${load0.map((x) => x.toFixed(2)).join(' ')}, after ${load1.map((x) => x.toFixed(2)).join(' ')}`,
    `h2load -t1, ${rounds} interleaved rounds of ${secs} s; medians`,
    '',
    '| request, connections, streams each | calls/s | engine CPU ms/call | of which main thread |',
    '|---|---:|---:|---:|',
    ...rows.map((r) => {
      const s = samples.get(r.id)!;
      return `| ${r.id} | ${median(s.map((x) => x.rate)).toFixed(0)} | ${median(s.map((x) => x.ms)).toFixed(3)} | ${median(s.map((x) => x.mainMs)).toFixed(3)} |`;
    }),
  ].join('\n') + '\n');
}

main().catch(async (e) => {
  process.stderr.write(`${(e as Error).stack}\n`);
  await stopAll();
  process.exit(1);
});
