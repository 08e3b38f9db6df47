// `node --import tsx test/bench/gateway-hop.ts [--rounds=3] [--secs=5] [--clients=16] [--image] [--profile=DIR] [--only=gw-direct,gw-hono] [--ab-flags="--max-semi-space-size=16"] [--ab-dist=DIR] [--warmup=2]`
// Issue 25's side-by-side: the small JSON call to the recommender, driven by
// wrk, against (1) the engine alone over HTTP, (2) our gateway with its
// direct route, (2b) the same with ModelInfer over the local channel
// (--engine-local-socket, docs/engine/local-channel.md), (3) our gateway with every call through Hono
// (--direct-route=false), (4) the FastAPI + uvicorn peer
// (peer/fastapi_gateway.py, grpcio, stubs generated from protocol/*.proto);
// all in front of ONE engine, in interleaved rounds so a shared machine's
// noise falls on every row alike. Each row: calls/s, p99, CPU ms per call of
// the front process and of the engine (/proc). --image adds the image
// pipeline (image_search, a JPEG body) through both gateways. --profile=DIR
// runs the gateways under --cpu-prof (profiles land in DIR at exit) and the
// engine too (its threads' profiles in DIR/engine).
// --ab-flags adds a row gw-local-ab: a second local-channel gateway started
// with those Node flags, measured in the same rounds (an A/B of the flags);
// --ab-dist=DIR starts that gateway from another build's DIR/gateway/main.js
// instead (an A/B of code: copy dist/ under node_modules/.cache first, so its
// imports still resolve).
// (--engine-ab, a second engine with node:http reading every HTTP request, was
// removed in issue 38 with the switch ENGINE_HTTP1_FRONT it needed: the HTTP
// port is one door, its front always on; docs/architecture.md#doors-into-the-engine.)
// --warmup=SECS: how long each row is driven before the rounds (default 2;
// V8 keeps optimising the Node rows' call path for 10-30 s, so steady-state
// figures want 15 or more).
// BENCH_COMPILED=1 runs the engine and the gateways from dist/ (`npm run
// build`), as `npm start` does: issue 37's bar is measured that way (under
// tsx each closure a call creates is wrapped in __name(), ~14 % more gateway
// CPU per call; docs/gateway/performance.md).
// Prints a Markdown table with the machine and the load average.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { makeJpeg } from '../fixtures/images.ts';
import { which, wrkPost, type CLoadResult } from './c-clients.ts';
import {
  cpuSeconds,
  freePort,
  removeTempDir,
  ROOT,
  stopAll,
  stopChild,
  trackChild,
  trackTempDir,
  waitUntil,
  type Child,
} from './processes.ts';
import { BENCH_API_KEY, BUNDLED_REPO, startEngineProc, startGatewayProc } from './services.ts';

interface Front {
  id: string;
  /** wrk connections for this row (default --clients). */
  clients?: number;
  label: string;
  pid?: number;
  /** The engine process this row loads (default: the run's engine). */
  enginePid?: number;
  port: number;
  path: string;
  body: string;
  headers: Record<string, string>;
}
interface Sample extends CLoadResult {
  frontMs?: number;
  engineMs: number;
}

const PY = '/usr/bin/python3';

/** Why the FastAPI peer cannot run here, or undefined when it can. */
export function fastapiMissing(): string | undefined {
  try {
    execFileSync(PY, ['-c', 'import fastapi, uvicorn, uvloop, httptools, grpc, grpc_tools'], { stdio: 'pipe' });
    return undefined;
  } catch (e) {
    const msg = String((e as { stderr?: Buffer }).stderr ?? e)
      .trim()
      .split('\n')
      .pop();
    return `not measured: ${msg} (Debian python3-fastapi python3-uvicorn python3-uvloop python3-httptools python3-grpcio python3-grpc-tools)`;
  }
}

/**
 * Start the FastAPI peer in front of `engine` (a gRPC target); its stubs are generated into a temp
 * dir first, removed when the peer exits (or when it cannot start).
 */
export async function startFastapiPeer(engine: string): Promise<{ child: Child; port: number }> {
  const stubs = trackTempDir(mkdtempSync(path.join(os.tmpdir(), 'fastapi-stubs-')));
  const removeStubs = () => removeTempDir(stubs);
  const proto = path.join(ROOT, 'protocol');
  let port: number;
  try {
    execFileSync(
      PY,
      [
        '-m',
        'grpc_tools.protoc',
        `-I${proto}`,
        `--python_out=${stubs}`,
        `--grpc_python_out=${stubs}`,
        'grpc_service.proto',
        'model_config.proto',
      ],
      { cwd: proto },
    );
    port = await freePort();
  } catch (e) {
    removeStubs();
    throw e;
  }
  const proc = spawn(
    PY,
    [path.join(ROOT, 'test/bench/peer/fastapi_gateway.py'), `--port=${port}`, `--engine=${engine}`, `--stubs=${stubs}`],
    {
      env: { ...process.env, RECOMMENDER_API_KEYS: BENCH_API_KEY },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  proc.once('exit', removeStubs);
  proc.once('error', removeStubs); // not started: no 'exit' follows
  let tail = '';
  const keep = (d: Buffer) => (tail = (tail + d.toString()).slice(-2000));
  proc.stdout!.on('data', keep);
  proc.stderr!.on('data', keep);
  // Tracked: stopAll() ends the peer too when the run is stopped by a signal (it used to outlive the run).
  const child = trackChild({ name: 'fastapi', proc, tail: () => tail });
  await waitUntil(
    child,
    async () => {
      const r = await fetch(`http://127.0.0.1:${port}/docs`).catch(() => undefined);
      return r?.status === 200;
    },
    30_000,
  ).catch(async (e) => {
    await stopChild(child);
    throw e;
  });
  return { child, port };
}

async function sample(f: Front, enginePid: number, clients: number, secs: number, dir: string): Promise<Sample> {
  const e0 = cpuSeconds(enginePid).total;
  const f0 = f.pid ? cpuSeconds(f.pid).total : 0;
  const r = await wrkPost(f.port, f.path, f.body, f.headers, clients, secs, dir);
  const e1 = cpuSeconds(enginePid).total;
  const f1 = f.pid ? cpuSeconds(f.pid).total : 0;
  if (r.ok <= 0) throw new Error(`${f.id}: no call succeeded (${r.failed} failed)`);
  return { ...r, engineMs: ((e1 - e0) * 1000) / r.ok, ...(f.pid ? { frontMs: ((f1 - f0) * 1000) / r.ok } : {}) };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fmt = (n: number | undefined, d = 3) => (n === undefined ? '—' : n.toFixed(d));

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string', default: '3' },
      secs: { type: 'string', default: '5' },
      clients: { type: 'string', default: '16' },
      image: { type: 'boolean', default: false },
      profile: { type: 'string' },
      only: { type: 'string' },
      'ab-flags': { type: 'string' },
      'ab-dist': { type: 'string' },
      warmup: { type: 'string', default: '2' },
    },
  });
  if (!which('wrk')) throw new Error('wrk not installed (Debian wrk)');
  // The request bodies; removed at exit, also on failure or a signal (stopAll removes tracked dirs).
  const dir = trackTempDir(mkdtempSync(path.join(os.tmpdir(), 'gw-hop-')));
  const onSignal = () => void stopAll().finally(() => process.exit(130));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    await hop(values, dir);
  } finally {
    removeTempDir(dir);
  }
}

interface HopArgs {
  rounds?: string;
  secs?: string;
  clients?: string;
  image?: boolean;
  profile?: string;
  only?: string;
  'ab-flags'?: string;
  'ab-dist'?: string;
  warmup?: string;
}

async function hop(values: HopArgs, dir: string): Promise<void> {
  const [rounds, secs, clients] = [Number(values.rounds), Number(values.secs), Number(values.clients)];
  const load0 = os.loadavg();
  const models = ['product_recommender_model', ...(values.image ? ['search_pipeline_ensemble'] : [])];
  const localSock = path.join(os.tmpdir(), `bench-${process.pid}-hop-local.sock`);
  const prof = values.profile ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(values.profile)}`] : [];
  const engine = await startEngineProc(
    'engine-hop',
    BUNDLED_REPO,
    ['--model-control-mode=explicit', ...models.map((m) => `--load-model=${m}`), `--local-socket=${localSock}`],
    {},
    1,
    values.profile ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(values.profile, 'engine')}`] : [],
  );
  const gwDirect = await startGatewayProc('gw-direct', engine.grpcSocket, [], prof);
  const gwLocal = await startGatewayProc('gw-local', engine.grpcSocket, [`--engine-local-socket=${localSock}`], prof);
  const gwHono = await startGatewayProc('gw-hono', engine.grpcSocket, ['--direct-route=false'], prof);
  const abFlags = values['ab-flags']?.split(/\s+/).filter(Boolean) ?? [];
  const abDist = values['ab-dist'];
  const abLabel = [abFlags.length ? `node ${abFlags.join(' ')}` : '', abDist ? `from ${abDist}` : ''].filter(Boolean).join(', ');
  const gwAb = abLabel
    ? await startGatewayProc(
        'gw-local-ab',
        engine.grpcSocket,
        [`--engine-local-socket=${localSock}`],
        [...prof, ...abFlags],
        abDist ? path.relative(ROOT, path.resolve(abDist, 'gateway/main.js')) : undefined,
      )
    : undefined;
  const peerWhy = fastapiMissing();
  const peer = peerWhy ? undefined : await startFastapiPeer(engine.grpcSocket);
  const features = Array.from({ length: 64 }, (_, i) => Math.sin(i * 0.1 + 1));
  const fnBody = path.join(dir, 'fn.json');
  writeFileSync(fnBody, JSON.stringify({ inputs: { user_features: { data: features, shape: [1, 64] } } }));
  const engBody = path.join(dir, 'engine.json');
  writeFileSync(engBody, JSON.stringify({ inputs: [{ name: 'user_features', shape: [1, 64], datatype: 'FP32', data: features }] }));
  const json = { 'Content-Type': 'application/json' };
  const key = { ...json, 'x-api-key': BENCH_API_KEY };
  const fn = { path: '/fn/product_recommender', body: fnBody, headers: key };
  const fronts: Front[] = [
    {
      id: 'engine',
      label: 'engine alone, HTTP JSON infer',
      port: engine.httpPort,
      path: '/v2/models/product_recommender_model/infer',
      body: engBody,
      headers: json,
    },
    // The engine's CPU per call falls as its batches grow with load: this row runs it nearer the gateways' rate.
    {
      id: 'engine-c2',
      label: 'engine alone, HTTP JSON infer, 2 connections',
      clients: 2,
      port: engine.httpPort,
      path: '/v2/models/product_recommender_model/infer',
      body: engBody,
      headers: json,
    },
    { id: 'gw-direct', label: 'our gateway, direct route', pid: gwDirect.child.proc.pid, port: gwDirect.port, ...fn },
    { id: 'gw-local', label: 'our gateway, local channel', pid: gwLocal.child.proc.pid, port: gwLocal.port, ...fn },
    ...(gwAb
      ? [{ id: 'gw-local-ab', label: `our gateway, local channel, ${abLabel}`, pid: gwAb.child.proc.pid, port: gwAb.port, ...fn }]
      : []),
    { id: 'gw-hono', label: 'our gateway, Hono route (--direct-route=false)', pid: gwHono.child.proc.pid, port: gwHono.port, ...fn },
    ...(peer ? [{ id: 'fastapi', label: 'FastAPI + uvicorn + grpcio peer', pid: peer.child.proc.pid, port: peer.port, ...fn }] : []),
  ];
  if (values.image) {
    const jpeg = path.join(dir, 'image.jpg');
    writeFileSync(jpeg, await makeJpeg(640, 480, 7));
    const img = { path: '/fn/image_search', body: jpeg, headers: { 'Content-Type': 'image/jpeg' } };
    fronts.push({ id: 'img-gw', label: 'image_search, our gateway, gRPC', pid: gwDirect.child.proc.pid, port: gwDirect.port, ...img });
    fronts.push({
      id: 'img-local',
      label: 'image_search, our gateway, local channel',
      pid: gwLocal.child.proc.pid,
      port: gwLocal.port,
      ...img,
    });
    if (peer) fronts.push({ id: 'img-fastapi', label: 'image_search, FastAPI peer', pid: peer.child.proc.pid, port: peer.port, ...img });
  }
  if (values.only) {
    const keep = values.only.split(',');
    fronts.splice(0, fronts.length, ...fronts.filter((f) => keep.includes(f.id)));
  }
  const samples = new Map<string, Sample[]>(fronts.map((f) => [f.id, []]));
  const failed = new Map<string, string>();
  let carried = '';
  const localCalls = async () => {
    const m = await fetch(`http://127.0.0.1:${gwLocal.port}/metrics`).then((r) => r.text());
    return Number(/^gateway_engine_local_channel_calls (\d+)/m.exec(m)?.[1] ?? 0);
  };
  try {
    for (const f of fronts) await wrkPost(f.port, f.path, f.body, f.headers, f.clients ?? clients, Number(values.warmup ?? 2), dir); // warm-up
    // The row measures the channel only if it carried the warm-up's calls (the gateway's metric says).
    if (fronts.some((f) => f.id === 'gw-local') && (await localCalls()) < 100)
      failed.set('gw-local', 'not measured: the local channel did not carry the calls');
    for (let r = 0; r < rounds; r++) {
      for (const f of fronts) {
        if (failed.has(f.id)) continue;
        const c = f.clients ?? (f.id.startsWith('img') ? 4 : clients);
        let s: Sample;
        try {
          s = await sample(f, f.enginePid ?? engine.child.proc.pid!, c, secs, dir);
        } catch (e) {
          failed.set(f.id, `not measured: ${(e as Error).message.split('\n')[0]}`);
          continue;
        }
        samples.get(f.id)!.push(s);
        process.stderr.write(
          `round ${r + 1} ${f.id}: ${(s.ok / s.seconds).toFixed(0)}/s p99 ${fmt(s.p99Ms, 2)} ms, front ${fmt(s.frontMs)} ms, engine ${fmt(s.engineMs)} ms CPU/call\n`,
        );
      }
    }
    if (fronts.some((f) => f.id === 'gw-local')) {
      const sent = ['gw-local', 'img-local'].reduce((n, id) => n + (samples.get(id) ?? []).reduce((m, x) => m + x.ok, 0), 0);
      carried = `the local-channel rows' ${sent} measured calls; the channel carried ${await localCalls()} calls in all (warm-up included)`;
    }
  } finally {
    await gwDirect.stop();
    await gwHono.stop();
    await gwLocal.stop();
    await gwAb?.stop();
    if (peer) await stopChild(peer.child);
    await engine.stop();
    await stopAll();
  }
  const load1 = os.loadavg();
  const cpu = os.cpus();
  const lines = [
    `machine: ${cpu.length} × ${cpu[0]?.model.trim()}, Node ${process.version}; load average before ${load0.map((x) => x.toFixed(2)).join(' ')}, after ${load1.map((x) => x.toFixed(2)).join(' ')}`,
    `wrk -t1 -c${clients} (image rows -c4, the engine's second row -c2), each row warmed up for ${values.warmup ?? 2} s, then ${rounds} interleaved rounds of ${secs} s; medians of the rounds`,
    '',
    '| row | calls/s | p99 ms | front CPU ms/call | engine CPU ms/call |',
    '|---|---:|---:|---:|---:|',
    ...fronts.map((f) => {
      const s = samples.get(f.id)!;
      if (!s.length) return `| ${f.label} | ${failed.get(f.id) ?? 'not measured'} | | | |`;
      return `| ${f.label} | ${median(s.map((x) => x.ok / x.seconds)).toFixed(0)} | ${fmt(median(s.map((x) => x.p99Ms ?? 0)), 2)} | ${f.pid ? fmt(median(s.map((x) => x.frontMs!))) : '—'} | ${fmt(median(s.map((x) => x.engineMs)))} |`;
    }),
    ...(peerWhy ? [`| FastAPI + uvicorn + grpcio peer | ${peerWhy} | | | |`] : []),
    ...(carried ? ['', carried] : []),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  main().catch(async (e) => {
    process.stderr.write(`${(e as Error).stack}\n`);
    await stopAll();
    process.exit(1);
  });
}
