// `npm run soak -- --attacks[=rapid-reset,ping-flood,...]` (issue 37): an
// engine child whose TCP gRPC port is the own HTTP/2 front
// (ENGINE_GRPC_FRONT=own, default bounds), a client calling ModelInfer on
// `simple` in a loop on its own connection, and each attack in turn
// (test/fixtures/h2-attacks.ts; slowloris and a pipeline flood on the
// HTTP/1.1 port). For each: how far it got (units sent before the cut), how
// and when the engine cut it off, the other client's p50/p99 during it
// against the same client's idle p99, and the engine's RSS before and after.
// Prints a table (docs/engine/h2-front.md#attack-suite records one run) and
// `--out=FILE` writes the JSON.
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TritonGrpcClient, type ModelInferRequest } from '../../client/grpc-client.ts';
import { H2_ATTACKS } from '../fixtures/h2-attacks.ts';
import { writeTestRepository } from '../fixtures/test-models.ts';
import { freePort, rssMiB, spawnTs, stopAll, trackTempDir, waitUntil } from './processes.ts';

interface ChildResult {
  sent: number | string;
  answer: string;
  cutMs?: number;
}

/** Run one attack in soak-attack-child.ts and read its result line. */
function attackInChild(name: string, grpcPort: number, httpPort: number): Promise<ChildResult> {
  const child = spawnTs(`attack ${name}`, 'test/bench/soak-attack-child.ts', [name, String(grpcPort), String(httpPort)]);
  return new Promise((resolve, reject) => {
    let out = '';
    child.proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    child.proc.on('exit', (code) => {
      const line = out.trim().split('\n').pop() ?? '';
      if (code === 0 && line.startsWith('{')) resolve(JSON.parse(line) as ChildResult);
      else reject(new Error(`attack ${name} exited ${code}: ${child.tail()}`));
    });
  });
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
  calls: number;
  failed: number;
  p50Ms: number;
  p99Ms: number;
  rssBeforeMiB: number;
  rssAfterMiB: number;
}

const pct = (xs: number[], p: number) =>
  xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))]! : NaN;
const round = (x: number) => Math.round(x * 100) / 100;

/** The other client's latencies while `during` runs (one call at a time, 2 ms apart). */
async function measured<T>(client: TritonGrpcClient, during: () => Promise<T>): Promise<{ result: T; lat: number[]; failed: number }> {
  const lat: number[] = [];
  let failed = 0;
  let stop = false;
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
  return { result, lat, failed };
}

export async function runAttacks(names: string[], out?: string): Promise<void> {
  const chosen = names.length ? names : [...ATTACK_NAMES];
  for (const n of chosen)
    if (!(ATTACK_NAMES as readonly string[]).includes(n)) throw new Error(`--attacks: unknown '${n}' (one of ${ATTACK_NAMES.join(', ')})`);
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
    ],
    { ENGINE_GRPC_FRONT: 'own' },
  );
  const client = new TritonGrpcClient(`127.0.0.1:${grpcPort}`);
  try {
    await waitUntil(engine, async () => (await client.serverReady({ timeoutMs: 1000 })).ready, 120_000);
    const pid = engine.proc.pid!;
    const idle = await measured(client, () => new Promise((r) => setTimeout(r, 3000)));
    const idleP99 = pct(idle.lat, 0.99);
    console.log(
      `idle: ${idle.lat.length} calls, p50 ${round(pct(idle.lat, 0.5))} ms, p99 ${round(idleP99)} ms, RSS ${round(rssMiB(pid))} MiB`,
    );
    const rows: Row[] = [];
    for (const name of chosen) {
      const rssBefore = rssMiB(pid);
      const m = await measured(client, () => attackInChild(name, grpcPort, httpPort));
      await new Promise((r) => setTimeout(r, 1000));
      const row: Row = {
        attack: name,
        sent: m.result.sent,
        answer: m.result.answer,
        cutMs: m.result.cutMs,
        calls: m.lat.length,
        failed: m.failed,
        p50Ms: round(pct(m.lat, 0.5)),
        p99Ms: round(pct(m.lat, 0.99)),
        rssBeforeMiB: round(rssBefore),
        rssAfterMiB: round(rssMiB(pid)),
      };
      rows.push(row);
      console.log(JSON.stringify(row));
    }
    console.log(
      `\n| attack | sent | engine's answer | cut after (ms) | other client: calls, failed | p50 / p99 ms (idle p99 ${round(idleP99)}) | RSS before → after (MiB) |`,
    );
    console.log('|---|---|---|---|---|---|---|');
    for (const r of rows)
      console.log(
        `| ${r.attack} | ${r.sent} | ${r.answer} | ${r.cutMs ?? '—'} | ${r.calls}, ${r.failed} | ${r.p50Ms} / ${r.p99Ms} | ${r.rssBeforeMiB} → ${r.rssAfterMiB} |`,
      );
    if (out) writeFileSync(out, JSON.stringify({ idleP99Ms: round(idleP99), rows }, null, 2));
  } finally {
    client.close();
    await stopAll();
  }
}
