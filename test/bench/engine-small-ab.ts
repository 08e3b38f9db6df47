// `node --import tsx test/bench/engine-small-ab.ts --base=DIR [--rounds=5] [--secs=4] [--only=c16m1] [--compiled] [--rps=N] [--together]
//   [--flags='NODE FLAGS'] [--base-flags='NODE FLAGS'] [--warmup=SECS]`
// An interleaved A/B of the engine's CPU per tiny inference (the rows of
// engine-small-call.ts): this tree's engine against the one in DIR (another
// checkout, e.g. `git worktree add DIR main`, with node_modules and
// native/build beside it; with --compiled both run `npm run build`'s dist/,
// built beforehand in each). Both engines run at once on the bundled
// repository of this tree, each row alternates which goes first, and each
// sample is that engine's own CPU (/proc) over h2load's calls, so load from
// elsewhere on a shared machine falls on both alike. Prints per-row medians
// and the paired ratio (this / base), with the load average. --rps caps each
// connection's calls per second (h2load --rps): both engines then do the same
// work per second with the same batching, which steadies the comparison
// (closed-loop rates differ, and with them the batch sizes). --together
// loads both engines at the same time (with --rps, the fairest comparison on
// a machine whose load changes from second to second). --warmup: as in
// engine-small-call.ts (30 for steady-state figures).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { TritonGrpcClient } from '../../client/grpc-client.ts';
import { ENGINE_NODE_FLAGS } from '../../engine/node-flags.ts';
import { grpcFrame, which } from './c-clients.ts';
import { cpuSeconds, freePort, ROOT, removeTempDir, trackTempDir } from './processes.ts';
import { BUNDLED_REPO } from './services.ts';
import { h2load, ROWS, smallBodies, warmUp } from './engine-small-rows.ts';

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

interface Engine {
  label: string;
  proc: ChildProcess;
  port: number;
  client: TritonGrpcClient;
}

async function startEngine(label: string, root: string, compiled: boolean, flags: string[]): Promise<Engine> {
  const [port, http, metrics] = [await freePort(), await freePort(), await freePort()];
  const entry = compiled ? [path.join(root, 'dist/engine/main.js')] : ['--import', 'tsx', path.join(root, 'engine/main.ts')];
  const args = [
    ...ENGINE_NODE_FLAGS,
    ...flags,
    ...entry,
    `--model-repository=${BUNDLED_REPO}`,
    `--grpc-port=${port}`,
    `--http-port=${http}`,
    `--metrics-port=${metrics}`,
    '--http-address=127.0.0.1',
    '--model-control-mode=explicit',
    '--load-model=product_recommender_model',
  ];
  const proc = spawn(process.execPath, args, {
    cwd: root,
    env: { ...process.env, ENGINE_QUIET: '1' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const client = new TritonGrpcClient(`127.0.0.1:${port}`);
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`engine ${label} (${root}) exited with ${proc.exitCode}`);
    if ((await client.modelReady('product_recommender_model', '', { timeoutMs: 1000 }).catch(() => ({ ready: false }))).ready) break;
    if (Date.now() > deadline) throw new Error(`engine ${label} (${root}) not ready after 60 s`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return { label, proc, port, client };
}

async function stopEngine(e: Engine): Promise<void> {
  e.client.close();
  if (e.proc.exitCode !== null) return;
  await new Promise<void>((resolve) => {
    e.proc.once('exit', () => resolve());
    e.proc.kill('SIGTERM');
  });
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      base: { type: 'string' },
      rounds: { type: 'string', default: '5' },
      secs: { type: 'string', default: '4' },
      warmup: { type: 'string', default: '2' },
      only: { type: 'string' },
      compiled: { type: 'boolean', default: false },
      rps: { type: 'string' },
      flags: { type: 'string', default: '' },
      'base-flags': { type: 'string', default: '' },
      together: { type: 'boolean', default: false },
    },
  });
  if (!values.base) throw new Error('--base=DIR: the checkout to compare against');
  if (!which('h2load')) throw new Error('h2load not installed (Debian nghttp2-client)');
  const [rounds, secs, rps] = [Number(values.rounds), Number(values.secs), values.rps ? Number(values.rps) : undefined];
  const dir = trackTempDir(mkdtempSync(path.join(os.tmpdir(), 'eng-ab-')));
  const files: Record<string, string> = {};
  for (const [k, req] of Object.entries(smallBodies())) writeFileSync((files[k] = path.join(dir, `${k}.bin`)), grpcFrame(req as never));
  const rows = ROWS.filter((r) => !values.only || r.id.replace(/ /g, '').includes(values.only));
  const load0 = os.loadavg();
  const words = (x: string) => x.split(' ').filter(Boolean);
  const engines = [
    await startEngine('this', ROOT, values.compiled!, words(values.flags!)),
    await startEngine('base', path.resolve(values.base), values.compiled!, words(values['base-flags']!)),
  ];
  const samples = new Map<string, { ms: number; mainMs: number; rate: number }[]>();
  try {
    for (const e of engines) await warmUp(e.port, files, rows, Number(values.warmup));
    for (let r = 0; r < rounds; r++) {
      for (const [i, row] of rows.entries()) {
        const order = (r + i) % 2 === 0 ? engines : [...engines].reverse();
        const measure = async (e: Engine) => {
          const pid = e.proc.pid!;
          const c0 = cpuSeconds(pid);
          const res = await h2load(e.port, files[row.body]!, row.c, row.m, secs, rps);
          const c1 = cpuSeconds(pid);
          if (res.ok <= 0 || res.failed > 0) throw new Error(`${e.label} ${row.id}: ${res.ok} ok, ${res.failed} failed`);
          const s = { rate: res.ok / secs, ms: ((c1.total - c0.total) * 1000) / res.ok, mainMs: ((c1.main - c0.main) * 1000) / res.ok };
          const key = `${row.id}|${e.label}`;
          samples.set(key, [...(samples.get(key) ?? []), s]);
          process.stderr.write(
            `round ${r + 1} ${row.id} ${e.label}: ${s.rate.toFixed(0)}/s, ${s.ms.toFixed(3)} ms CPU/call (main ${s.mainMs.toFixed(3)})\n`,
          );
        };
        if (values.together) await Promise.all(order.map(measure));
        else for (const e of order) await measure(e);
      }
    }
  } finally {
    for (const e of engines) await stopEngine(e);
    removeTempDir(dir);
  }
  const load1 = os.loadavg();
  const cpu = os.cpus();
  const cell = (key: string, f: (s: { ms: number; mainMs: number; rate: number }) => number, d = 3) =>
    median(samples.get(key)!.map(f)).toFixed(d);
  const ratio = (row: string) => {
    const a = samples.get(`${row}|this`)!;
    const b = samples.get(`${row}|base`)!;
    return median(a.map((s, i) => s.ms / b[i]!.ms)).toFixed(2);
  };
  process.stdout.write(
    [
      `machine: ${cpu.length} × ${cpu[0]?.model.trim()}, Node ${process.version}, ${values.compiled ? 'compiled (dist/)' : 'tsx'}; load average before ${load0.map((x) => x.toFixed(2)).join(' ')}, after ${load1.map((x) => x.toFixed(2)).join(' ')}`,
      `h2load -t1${rps ? ` --rps=${rps}` : ''}, ${rounds} interleaved rounds of ${secs} s; medians; this: ${ROOT} ${values.flags}; base: ${values.base} ${values['base-flags']}`,
      '',
      '| request, connections, streams each | this: calls/s | CPU ms/call | main | base: calls/s | CPU ms/call | main | this/base CPU (paired median) |',
      '|---|---:|---:|---:|---:|---:|---:|---:|',
      ...rows.map(
        (r) =>
          `| ${r.id} | ${cell(`${r.id}|this`, (s) => s.rate, 0)} | ${cell(`${r.id}|this`, (s) => s.ms)} | ${cell(`${r.id}|this`, (s) => s.mainMs)} | ${cell(`${r.id}|base`, (s) => s.rate, 0)} | ${cell(`${r.id}|base`, (s) => s.ms)} | ${cell(`${r.id}|base`, (s) => s.mainMs)} | ${ratio(r.id)} |`,
      ),
    ].join('\n') + '\n',
  );
}

main().catch((e) => {
  process.stderr.write(`${(e as Error).stack}\n`);
  process.exit(1);
});
