// `node --import tsx test/bench/engine-small-call.ts [--rounds=3] [--secs=4] [--only=c16m1] [--profile=DIR] [--floor] [--warmup=SECS] [--ab-flags="--max-semi-space-size=32"] [--ab-env="ENGINE_GRPC_FRONT=grpc-js"]`
// The engine's CPU per tiny inference (the recommender, 64 floats in, 100
// out) by request shape and connection pattern, h2load driving gRPC:
//  - shape: the minimal request (model, input, raw bytes) against the one the
//    gateway sends (plus an id, the model version, the requested output by
//    name), to find whether a gateway call costs the engine more (issue 25);
//  - pattern: 16 connections with one request in flight each (perf_analyzer's
//    sync mode, `h2load -c16 -m1`), 4 connections × 1, and 16 × 8 streams;
//  - and the same minimal call as perf_analyzer sends it by default: HTTP/1.1
//    with the binary tensor extension, one request in flight on each of 16
//    keep-alive connections (wrk -c16), to the engine's HTTP port.
// Rounds interleave every row so a shared machine's noise falls on all alike.
// --only keeps the rows whose id (spaces removed) contains it; --profile runs
// the engine under --cpu-prof (profiles in DIR at exit). --floor adds
// node:http2 alone answering the same calls (floor-server.ts h2: read the
// request, answer a fixed message with trailers), measured in the same
// rounds: what any engine on node:http2 pays per call in that pattern; and
// the engine's own HTTP/2 server answering the same way (floor-server.ts
// h2own), what the engine's gRPC port pays now.
// --warmup (default 2 s) loads each process first with every row's pattern in
// turn: V8 keeps optimizing and deoptimizing the call path for about 20-30 s
// of a new pattern (background compiler threads busy meanwhile), so short
// warm-ups measure part of that; 30 gives steady-state figures.
// --ab-flags adds a second engine started with those Node flags, measured in
// the same rounds (an A/B of the flags); --ab-env one started with those
// environment variables (ENGINE_GRPC_FRONT=grpc-js: the port on grpc-js and
// node:http2, as before the own front).
// Prints a Markdown table with the machine and the load average.
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { grpcFrame, httpBinaryBody, which, wrkPost } from './c-clients.ts';
import { cpuSeconds, freePort, spawnTs, stopAll, waitUntil } from './processes.ts';
import { ENGINE_NODE_FLAGS } from '../../engine/node-flags.ts';
import { BUNDLED_REPO, startEngineProc } from './services.ts';
import { h2load, ROWS, smallBodies, warmUp } from './engine-small-rows.ts';

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string', default: '3' },
      secs: { type: 'string', default: '4' },
      warmup: { type: 'string', default: '2' },
      only: { type: 'string' },
      profile: { type: 'string' },
      floor: { type: 'boolean', default: false },
      'ab-flags': { type: 'string' },
      'ab-env': { type: 'string' },
    },
  });
  const [rounds, secs] = [Number(values.rounds), Number(values.secs)];
  if (!which('h2load')) throw new Error('h2load not installed (Debian nghttp2-client)');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'eng-small-'));
  const load0 = os.loadavg();
  const engine = await startEngineProc(
    'engine-small',
    BUNDLED_REPO,
    ['--model-control-mode=explicit', '--load-model=product_recommender_model'],
    {},
    1,
    values.profile ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(values.profile)}`] : [],
  );
  const files: Record<string, string> = {};
  for (const [k, req] of Object.entries(smallBodies())) writeFileSync((files[k] = path.join(dir, `${k}.bin`)), grpcFrame(req as never));
  const rows = ROWS.filter((r) => !values.only || r.id.replace(/ /g, '').includes(values.only));
  const httpRow = which('wrk') && (!values.only || HTTP_ROW.replace(/ /g, '').includes(values.only)) ? HTTP_ROW : undefined;
  const minimal = smallBodies().minimal as {
    inputs: Array<{ name: string; datatype: string; shape: number[] }>;
    raw_input_contents: Buffer[];
  };
  const http = httpBinaryBody(minimal.inputs[0]!, minimal.raw_input_contents[0]!);
  writeFileSync((files.http = path.join(dir, 'http.bin')), http.body);
  const httpLoad = (port: number, s: number) =>
    wrkPost(
      port,
      '/v2/models/product_recommender_model/infer',
      files.http!,
      { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': String(http.headerLength) },
      16,
      s,
      dir,
    );
  const samples = new Map<string, Array<{ rate: number; ms: number; mainMs: number }>>(rows.map((r) => [r.id, []]));
  const floors = values.floor ? [await startFloor('h2'), await startFloor('h2own')] : [];
  const abFlags = values['ab-flags']?.split(/\s+/).filter(Boolean);
  const abEnv = Object.fromEntries(
    (values['ab-env']?.split(/\s+/).filter(Boolean) ?? []).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
  const abLabel = [...(abFlags ?? []), ...Object.entries(abEnv).map(([k, v]) => `${k}=${v}`)].join(' ');
  const ab = abLabel
    ? await startEngineProc(
        'engine-small-ab',
        BUNDLED_REPO,
        ['--model-control-mode=explicit', '--load-model=product_recommender_model'],
        abEnv,
        1,
        abFlags ?? [],
      )
    : undefined;
  const targets = [
    { id: '', pid: engine.child.proc.pid!, port: engine.grpcPort },
    ...(ab ? [{ id: ` (engine, ${abLabel})`, pid: ab.child.proc.pid!, port: ab.grpcPort }] : []),
    ...floors.map((f) => ({ id: f.mode === 'h2' ? ' (node:http2 floor)' : ' (own HTTP/2 floor)', pid: f.pid, port: f.port })),
  ];
  for (const t of targets.slice(1)) for (const r of rows) samples.set(r.id + t.id, []);
  if (httpRow) samples.set(httpRow, []);
  /** One measured load of `pid`: calls/s and its CPU per call, kept under `id`. */
  const sample = async (round: number, id: string, pid: number, load: () => Promise<{ ok: number; failed: number }>) => {
    const c0 = cpuSeconds(pid);
    const res = await load();
    const c1 = cpuSeconds(pid);
    if (res.ok <= 0 || res.failed > 0) throw new Error(`${id}: ${res.ok} ok, ${res.failed} failed`);
    const s = { rate: res.ok / secs, ms: ((c1.total - c0.total) * 1000) / res.ok, mainMs: ((c1.main - c0.main) * 1000) / res.ok };
    samples.get(id)!.push(s);
    process.stderr.write(
      `round ${round + 1} ${id}: ${s.rate.toFixed(0)}/s, ${s.ms.toFixed(3)} ms CPU/call (main thread ${s.mainMs.toFixed(3)})\n`,
    );
  };
  try {
    for (const t of targets) await warmUp(t.port, files, rows, Number(values.warmup));
    if (httpRow) await httpLoad(engine.httpPort, Math.max(1, Math.round(Number(values.warmup) / (rows.length + 1))));
    for (let r = 0; r < rounds; r++) {
      for (const row of rows) {
        for (const t of targets) await sample(r, row.id + t.id, t.pid, () => h2load(t.port, files[row.body]!, row.c, row.m, secs));
      }
      if (httpRow) await sample(r, httpRow, engine.child.proc.pid!, () => httpLoad(engine.httpPort, secs));
    }
  } finally {
    await ab?.stop();
    await engine.stop();
    await stopAll();
    rmSync(dir, { recursive: true, force: true });
  }
  const load1 = os.loadavg();
  const cpu = os.cpus();
  process.stdout.write(
    [
      `machine: ${cpu.length} × ${cpu[0]?.model.trim()}, Node ${process.version}; load average before ${load0.map((x) => x.toFixed(2)).join(' ')}, after ${load1.map((x) => x.toFixed(2)).join(' ')}`,
      `h2load -t1 (the HTTP/1.1 row: wrk -t1 -c16), ${rounds} interleaved rounds of ${secs} s; medians`,
      '',
      '| request, connections, streams each | calls/s | engine CPU ms/call | of which main thread |',
      '|---|---:|---:|---:|',
      ...[...samples].map(
        ([id, s]) =>
          `| ${id} | ${median(s.map((x) => x.rate)).toFixed(0)} | ${median(s.map((x) => x.ms)).toFixed(3)} | ${median(s.map((x) => x.mainMs)).toFixed(3)} |`,
      ),
    ].join('\n') + '\n',
  );
}

/** perf_analyzer's default: HTTP/1.1, the binary tensor extension, one request in flight per connection. */
const HTTP_ROW = 'minimal c16 m1, HTTP/1.1 binary (wrk)';

/** floor-server.ts in `mode` (h2: node:http2, h2own: ours) on a free port, stopped by stopAll(). */
async function startFloor(mode: 'h2' | 'h2own'): Promise<{ mode: string; pid: number; port: number }> {
  const port = await freePort();
  const child = spawnTs(`floor-${mode}`, 'test/bench/floor-server.ts', [mode, String(port)], {}, ENGINE_NODE_FLAGS);
  await waitUntil(child, async () => child.tail().includes(`listening ${port}`), 30_000);
  return { mode, pid: child.proc.pid!, port };
}

main().catch(async (e) => {
  process.stderr.write(`${(e as Error).stack}\n`);
  await stopAll();
  process.exit(1);
});
