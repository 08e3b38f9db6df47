// A/B of what production runs: the engine and the gateway from dist/
// (`npm run build`, plain JavaScript) against the same sources through tsx
// (which wraps every named function in __name() for keepNames). Rows: the
// engine's CPU per tiny inference over HTTP (product_recommender_model,
// binary extension) and the gateway's small call (POST /fn/product_recommender,
// JSON) with each process's CPU per call, both loaded by wrk. Variants
// alternate within each round, so load from other work on the host falls on
// both alike; medians over the rounds.
// Usage: node --import tsx test/bench/compiled-ab.ts [rounds] [seconds] [clients]
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bodyDir, httpBinaryBody, which, wrkPost, type CLoadResult } from './c-clients.ts';
import { fp32Bytes } from './calls.ts';
import { cpuSeconds, ROOT, runCompiled } from './processes.ts';
import { BENCH_API_KEY, BUNDLED_REPO, startEngineProc, startGatewayProc } from './services.ts';

const rounds = Number(process.argv[2] ?? 3);
const secs = Number(process.argv[3] ?? 5);
const clients = Number(process.argv[4] ?? 16);
if (!which('wrk')) throw new Error('wrk not installed (Debian wrk)');
execFileSync(process.execPath, [path.join(ROOT, 'scripts/build.mjs'), '--if-stale'], { stdio: 'inherit' });

const dir = bodyDir();
const rec = httpBinaryBody({ name: 'user_features', datatype: 'FP32', shape: [1, 64] }, fp32Bytes(64));
const recFile = path.join(dir.dir, 'rec.bin');
writeFileSync(recFile, rec.body);
const fnFile = path.join(dir.dir, 'fn.json');
writeFileSync(
  fnFile,
  JSON.stringify({ inputs: { user_features: { data: Array.from({ length: 64 }, (_, i) => Math.sin(i)), shape: [1, 64] } } }),
);

/** CPU ms per call of each pid over a second `load` (the first warms up). */
async function measure(pids: number[], load: () => Promise<CLoadResult>): Promise<{ perCall: number[]; rate: number }> {
  await load();
  const before = pids.map((p) => cpuSeconds(p).total);
  const r = await load();
  const after = pids.map((p) => cpuSeconds(p).total);
  if (r.ok <= 0) throw new Error(`no call succeeded (${r.failed} failed)`);
  return { perCall: pids.map((_, i) => ((after[i]! - before[i]!) * 1000) / r.ok), rate: r.ok / r.seconds };
}

type Variant = 'tsx' | 'compiled';
const results: Record<Variant, { engineHttp: number[]; engineRate: number[]; gw: number[]; gwEngine: number[]; gwRate: number[] }> = {
  tsx: { engineHttp: [], engineRate: [], gw: [], gwEngine: [], gwRate: [] },
  compiled: { engineHttp: [], engineRate: [], gw: [], gwEngine: [], gwRate: [] },
};
const loads: number[] = [];
for (let round = 0; round < rounds; round++) {
  for (const v of (round % 2 ? ['compiled', 'tsx'] : ['tsx', 'compiled']) as Variant[]) {
    runCompiled(v === 'compiled');
    const e = await startEngineProc(`ab-${v}`, BUNDLED_REPO, ['--model-control-mode=explicit', '--load-model=product_recommender_model']);
    const gw = await startGatewayProc(`ab-gw-${v}`, e.grpcSocket);
    try {
      const ePid = e.child.proc.pid!;
      const h = await measure([ePid], () =>
        wrkPost(
          e.httpPort,
          '/v2/models/product_recommender_model/infer',
          recFile,
          { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': String(rec.headerLength) },
          clients,
          secs,
          dir.dir,
        ),
      );
      results[v].engineHttp.push(h.perCall[0]!);
      results[v].engineRate.push(h.rate);
      const g = await measure([gw.child.proc.pid!, ePid], () =>
        wrkPost(
          gw.port,
          '/fn/product_recommender',
          fnFile,
          { 'Content-Type': 'application/json', 'x-api-key': BENCH_API_KEY },
          clients,
          secs,
          dir.dir,
        ),
      );
      results[v].gw.push(g.perCall[0]!);
      results[v].gwEngine.push(g.perCall[1]!);
      results[v].gwRate.push(g.rate);
      loads.push(os.loadavg()[0]!);
      process.stderr.write(
        `round ${round + 1} ${v}: engine ${h.perCall[0]!.toFixed(3)} ms/inference (${h.rate.toFixed(0)}/s); gateway ${g.perCall[0]!.toFixed(3)} + engine ${g.perCall[1]!.toFixed(3)} ms/call (${g.rate.toFixed(0)}/s)\n`,
      );
    } finally {
      await gw.stop();
      await e.stop();
    }
  }
}
dir.remove();
const med = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]!;
const row = (label: string, k: keyof (typeof results)['tsx'], digits: number) =>
  `| ${label} | ${med(results.tsx[k]).toFixed(digits)} | ${med(results.compiled[k]).toFixed(digits)} | ${(med(results.compiled[k]) / med(results.tsx[k])).toFixed(2)} |`;
const cpus = os.cpus();
process.stdout.write(
  [
    `compiled vs tsx, ${rounds} rounds × ${secs} s per row, wrk ${clients} connections; ${cpus[0]?.model} × ${cpus.length}, Node ${process.version}, load average ${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)}; ${new Date().toISOString()}`,
    '',
    '| row (median) | tsx | compiled | compiled / tsx |',
    '|---|---|---|---|',
    row('engine CPU per tiny HTTP inference (ms)', 'engineHttp', 3),
    row('engine tiny HTTP inferences/s', 'engineRate', 0),
    row('gateway CPU per small call (ms)', 'gw', 3),
    row('engine CPU per gateway call (ms)', 'gwEngine', 3),
    row('gateway calls/s', 'gwRate', 0),
    '',
  ].join('\n'),
);
