// `npm run soak -- --attacks[=rapid-reset,ping-flood,...] [--attack-window-ms=3000] [--attack-nice=19]`
// (issue 37): an engine child whose TCP gRPC port is the own HTTP/2 front
// (ENGINE_GRPC_FRONT=own, default bounds), a client calling ModelInfer on
// `simple` in a loop on its own connection, and each attack in turn
// (test/fixtures/h2-attacks.ts; slowloris and a pipeline flood on the
// HTTP/1.1 port), sustained for the window: the attacker reconnects and
// starts again each time the engine cuts it, so the other client's p99 is
// over hundreds of calls made while the engine is under attack. For each:
// how far it got, how and when the engine cut it off (median over rounds),
// the other client's p50/p99 during it against the same client's idle p99
// (and their ratio), and the engine's RSS before, at its peak during, and
// after, against idle. Each attack's child starts, loads and connects first
// and says `ready`; the other client is measured only from its `go` to its
// result, so the child's start-up CPU (tsx, on a 2-core machine) is not
// counted. The attacker stands in for a remote host, so by default its child
// runs at nice 19 (`--attack-nice=0`: the same priority as the engine; the
// output says which). Prints a table (docs/engine/h2-front.md#attack-suite
// records runs) and `--out=FILE` writes the JSON.
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { TritonGrpcClient, type ModelInferRequest } from '../../client/grpc-client.ts';
import { H2_ATTACKS } from '../fixtures/h2-attacks.ts';
import { writeTestRepository } from '../fixtures/test-models.ts';
import { cpuSeconds, freePort, rssMiB, spawnTs, stopAll, trackTempDir, waitUntil } from './processes.ts';

/** How the suite runs each attack. */
export interface AttackOptions {
  /** How long each attack is sustained (the attacker reconnects after each cut), ms. */
  windowMs: number;
  /** The attacker child's nice value (0: the engine's priority). */
  nice: number;
  /** Extra engine flags (`--engine-flags`), e.g. `--grpc-h2-limit=flood-penalty-ms=0` to compare a bound on and off. */
  engineFlags?: string[];
}

interface ChildResult {
  rounds: number;
  sent: number | string;
  answer: string;
  cutMs?: number;
}

/** One attack's child, ready: go() starts the attack and resolves with its result line; exited once the child is gone. */
interface ReadyAttack {
  go(): Promise<ChildResult>;
  exited: Promise<void>;
}

/** Every thread of process `pid` at nice `nice` (Linux sets a nice value per thread). */
function renice(pid: number, nice: number): void {
  for (const tid of readdirSync(`/proc/${pid}/task`)) os.setPriority(Number(tid), nice);
}

/**
 * Start one attack in soak-attack-child.ts and wait for its `ready` line (node and tsx up, its modules loaded, the
 * attack connected and built), so that none of that start-up CPU falls in the window measured around go().
 */
async function attackInChild(name: string, grpcPort: number, httpPort: number, opts: AttackOptions): Promise<ReadyAttack> {
  const args = [name, String(grpcPort), String(httpPort), String(opts.windowMs)];
  const child = spawnTs(`attack ${name}`, 'test/bench/soak-attack-child.ts', args, {}, [], 'pipe');
  if (opts.nice) renice(child.proc.pid!, opts.nice);
  const exited = new Promise<void>((resolve) => child.proc.once('exit', () => resolve()));
  const lines = createInterface({ input: child.proc.stdout! })[Symbol.asyncIterator]();
  /** The next stdout line that `wanted` accepts; throws when the child ends first. */
  const next = async (wanted: (line: string) => boolean): Promise<string> => {
    for (;;) {
      const r = await lines.next();
      if (r.done) {
        await exited;
        throw new Error(`attack ${name} exited ${child.proc.exitCode ?? child.proc.signalCode}: ${child.tail()}`);
      }
      if (wanted(r.value)) return r.value;
    }
  };
  await next((l) => l === 'ready');
  if (opts.nice) renice(child.proc.pid!, opts.nice); // the threads started since
  return {
    go: async () => {
      child.proc.stdin!.end('go\n');
      return JSON.parse(await next((l) => l.startsWith('{'))) as ChildResult;
    },
    exited,
  };
}

const SIMPLE: ModelInferRequest = {
  model_name: 'simple',
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16] },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
  ],
  raw_input_contents: [Buffer.alloc(64, 1), Buffer.alloc(64, 2)],
};

export const ATTACK_NAMES = [...Object.keys(H2_ATTACKS), 'slowloris', 'pipeline-flood'] as const;

interface Row {
  attack: string;
  sent: number | string;
  answer: string;
  cutMs?: number;
  rounds: number;
  calls: number;
  failed: number;
  p50Ms: number;
  p99Ms: number;
  /** p99Ms over the same client's idle p99. */
  p99VsIdle: number;
  rssBeforeMiB: number;
  /** The engine's largest RSS sampled (every 100 ms) while the attack ran. */
  rssPeakMiB: number;
  rssAfterMiB: number;
  /** The engine's CPU (all threads) while the attack ran, ms per second of the window; the idle window's is in the header. */
  engineCpuMsPerSec: number;
}

const pct = (xs: number[], p: number) =>
  xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))]! : NaN;
const round = (x: number) => Math.round(x * 100) / 100;

/** The other client's latencies while `during` runs (one call at a time, 2 ms apart), and the engine's peak RSS. */
async function measured<T>(
  client: TritonGrpcClient,
  pid: number,
  during: () => Promise<T>,
): Promise<{ result: T; lat: number[]; failed: number; rssPeak: number; cpuMs: number; ms: number }> {
  const lat: number[] = [];
  const [cpu0, t0] = [cpuSeconds(pid).total, performance.now()];
  let failed = 0;
  let stop = false;
  let rssPeak = rssMiB(pid);
  const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, rssMiB(pid))), 100);
  const loop = (async () => {
    while (!stop) {
      const t = performance.now();
      await client.modelInfer(SIMPLE, { timeoutMs: 10_000 }).then(
        () => lat.push(performance.now() - t),
        (e: unknown) => {
          if (failed++ === 0) console.error(`other client: ${(e as Error).message}`);
        },
      );
      await new Promise((r) => setTimeout(r, 2));
    }
  })();
  const result = await during();
  stop = true;
  await loop;
  clearInterval(sampler);
  const [cpuMs, ms] = [(cpuSeconds(pid).total - cpu0) * 1000, performance.now() - t0];
  return { result, lat, failed, rssPeak: Math.max(rssPeak, rssMiB(pid)), cpuMs, ms };
}

export async function runAttacks(names: string[], opts: AttackOptions, out?: string): Promise<void> {
  const chosen = names.length ? names : [...ATTACK_NAMES];
  for (const n of chosen)
    if (!(ATTACK_NAMES as readonly string[]).includes(n)) throw new Error(`--attacks: unknown '${n}' (one of ${ATTACK_NAMES.join(', ')})`);
  const front = process.env.ENGINE_GRPC_FRONT || 'own';
  const [grpcPort, httpPort, metricsPort] = [await freePort(), await freePort(), await freePort()];
  const repo = writeTestRepository(trackTempDir(mkdtempSync(path.join(os.tmpdir(), 'soak-attacks-'))), ['simple']);
  const engine = spawnTs(
    'engine',
    'engine/main.ts',
    [
      `--model-repository=${repo}`,
      `--grpc-port=${grpcPort}`,
      `--http-port=${httpPort}`,
      `--metrics-port=${metricsPort}`,
      '--http-address=127.0.0.1',
      '--model-control-mode=explicit',
      '--load-model=simple',
      ...(opts.engineFlags ?? []),
    ],
    // ENGINE_GRPC_FRONT=grpc-js runs the same attacks against node:http2, for comparison.
    { ENGINE_GRPC_FRONT: front },
  );
  const client = new TritonGrpcClient(`127.0.0.1:${grpcPort}`);
  try {
    await waitUntil(engine, async () => (await client.serverReady({ timeoutMs: 1000 })).ready, 120_000);
    const pid = engine.proc.pid!;
    const idle = await measured(client, pid, () => new Promise((r) => setTimeout(r, 3000)));
    const idleP99 = pct(idle.lat, 0.99);
    const idleRss = rssMiB(pid);
    const idleCpu = Math.round((idle.cpuMs / idle.ms) * 1000);
    const load = () =>
      os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ');
    console.log(
      `gRPC front ${front}${opts.engineFlags?.length ? ` (${opts.engineFlags.join(' ')})` : ''}; each attack sustained ${opts.windowMs} ms; attacker at nice ${opts.nice}; load average ${load()}\n` +
        `idle: ${idle.lat.length} calls, p50 ${round(pct(idle.lat, 0.5))} ms, p99 ${round(idleP99)} ms, RSS ${round(idleRss)} MiB, engine CPU ${idleCpu} ms/s`,
    );
    const rows: Row[] = [];
    for (const name of chosen) {
      const attack = await attackInChild(name, grpcPort, httpPort, opts);
      const rssBefore = rssMiB(pid);
      const m = await measured(client, pid, () => attack.go());
      await attack.exited;
      await new Promise((r) => setTimeout(r, 1000));
      const row: Row = {
        attack: name,
        sent: m.result.sent,
        answer: m.result.answer,
        cutMs: m.result.cutMs,
        rounds: m.result.rounds,
        calls: m.lat.length,
        failed: m.failed,
        p50Ms: round(pct(m.lat, 0.5)),
        p99Ms: round(pct(m.lat, 0.99)),
        p99VsIdle: round(pct(m.lat, 0.99) / idleP99),
        rssBeforeMiB: round(rssBefore),
        rssPeakMiB: round(m.rssPeak),
        rssAfterMiB: round(rssMiB(pid)),
        engineCpuMsPerSec: Math.round((m.cpuMs / m.ms) * 1000),
      };
      rows.push(row);
      console.log(JSON.stringify(row));
    }
    console.log(`load average ${load()}`);
    console.log(
      `\n| attack | sent | engine's answer | cut after (ms, median) | other client: calls, failed | p50 / p99 ms (idle p99 ${round(idleP99)}) | p99 ÷ idle p99 | RSS before / peak / after (MiB; idle ${round(idleRss)}) | engine CPU ms/s (idle ${idleCpu}) |`,
    );
    console.log('|---|---|---|---|---|---|---|---|---|');
    for (const r of rows)
      console.log(
        `| ${r.attack} | ${r.sent} | ${r.answer} | ${r.cutMs ?? '—'} | ${r.calls}, ${r.failed} | ${r.p50Ms} / ${r.p99Ms} | ${r.p99VsIdle}× | ${r.rssBeforeMiB} / ${r.rssPeakMiB} / ${r.rssAfterMiB} | ${r.engineCpuMsPerSec} |`,
      );
    const meta = {
      front,
      engineFlags: opts.engineFlags ?? [],
      windowMs: opts.windowMs,
      attackerNice: opts.nice,
      idleP99Ms: round(idleP99),
      idleRssMiB: round(idleRss),
    };
    if (out) writeFileSync(out, JSON.stringify({ ...meta, rows }, null, 2));
  } finally {
    client.close();
    await stopAll();
  }
}
