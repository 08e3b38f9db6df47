// Section 6's gateway rows: the small call (product_recommender, 64 floats
// in, 100 out) through the gateway's POST /fn (its direct route, and every
// call through Hono, and with ModelInfer over the engine's local channel,
// docs/engine/local-channel.md), and through the FastAPI + uvicorn + grpcio peer a user
// would write instead (gateway-hop.ts; "not measured: <why>" without its
// Debian packages), loaded by wrk (a C client, so
// no Node client shares the cores), with the CPU per call of each server
// process; beside it two floor gateways (floor-gateway.ts: node:http in,
// one ModelInfer to the same engine, bytes passed through), one calling with
// grpc-js, one with node:http2. The engine's direct HTTP row (cpu-rec-http,
// measured just before on the same engine) is the throughput the issue's
// "≥ 0.8× the direct engine" is judged against.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { which, WRK_MISSING, wrkPost, type CLoadResult } from './c-clients.ts';
import type { BenchContext } from './context.ts';
import { cpuSeconds, freePort, spawnTs, stopChild, waitUntil, type Child } from './processes.ts';
import type { GatewayCpuRow } from './report-cpu.ts';
import { BENCH_API_KEY, startGatewayProc, type EngineProc } from './services.ts';
import { fastapiMissing, startFastapiPeer } from './gateway-hop.ts';

/**
 * Warm-up of a full run's row: V8 keeps optimising a Node front's call path for 10-30 s of a new
 * load pattern (a 2 s warm-up measured the gateway at 0.15-0.19 ms per call, 15 s at 0.11-0.13),
 * and the figures compared with the Python peer should be each side's steady state.
 */
const STEADY_WARMUP_SECS = 15;

/**
 * Run `load` for a warm-up (a full run: STEADY_WARMUP_SECS; a quick run: half the window, at least 1 s), then for the window; CPU per call of
 * the front and the engine over the window, calls counted by the client. `check` (given the
 * row's successful calls, warm-up included) throws when the row did not measure what it says.
 */
async function twoProcessRow(
  ctx: BenchContext,
  id: string,
  label: string,
  front: number,
  engine: number,
  secs: number,
  load: (secs: number) => Promise<CLoadResult>,
  check?: (ok: number) => Promise<void>,
): Promise<GatewayCpuRow> {
  try {
    const warm = await load(ctx.quick ? Math.max(1, secs / 2) : STEADY_WARMUP_SECS);
    const [f0, e0] = [cpuSeconds(front), cpuSeconds(engine)];
    const r = await load(secs);
    const [f1, e1] = [cpuSeconds(front), cpuSeconds(engine)];
    if (r.ok <= 0) throw new Error(`no call succeeded (${r.failed} failed)`);
    await check?.(warm.ok + r.ok);
    const row: GatewayCpuRow = {
      id,
      label,
      calls: r.ok,
      failed: r.failed,
      throughput: r.ok / r.seconds,
      frontMs: ((f1.total - f0.total) * 1000) / r.ok,
      engineMs: ((e1.total - e0.total) * 1000) / r.ok,
    };
    ctx.log(`  ${label}: ${row.frontMs!.toFixed(3)} ms + engine ${row.engineMs!.toFixed(3)} ms CPU/call, ${row.throughput!.toFixed(0)}/s`);
    return row;
  } catch (e) {
    const why = (e as Error).message.split('\n')[0]!.slice(0, 200);
    ctx.log(`  ${label}: NOT MEASURED: ${why}`);
    return { id, label, skipped: why };
  }
}

async function startFloorGateway(
  engine: EngineProc,
  requestFile: string,
  client: 'grpcjs' | 'h2',
): Promise<{ child: Child; port: number }> {
  const port = await freePort();
  const child = spawnTs(`floor-gateway-${client}`, 'test/bench/floor-gateway.ts', [String(port), engine.grpcSocket, requestFile, client]);
  await waitUntil(child, async () => child.tail().includes(`listening ${port}`), 30_000).catch(async (e) => {
    await stopChild(child);
    throw e;
  });
  return { child, port };
}

/** ModelInfer calls the gateway on `port` sent over the local channel (its metrics). */
async function localChannelCalls(port: number): Promise<number> {
  const m = await fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text());
  return Number(/^gateway_engine_local_channel_calls (\d+)/m.exec(m)?.[1] ?? 0);
}

interface Front {
  pid: number;
  port: number;
  stop(): Promise<void>;
  /** Throws when the `ok` calls this front answered (warm-up and window) did not take the path the row names. */
  check?(ok: number): Promise<void>;
}

/**
 * The gateway rows into ctx.gatewayCpu, against `engine` (which has product_recommender_model loaded
 * and serves the local channel on `localSocket`); a row whose client or server is missing says why.
 */
export async function gatewayCpuPhase(
  ctx: BenchContext,
  engine: EngineProc,
  localSocket: string,
  recGrpcBody: string,
  clients: number,
  secs: number,
  dir: string,
): Promise<void> {
  ctx.log('  gateway small call from wrk, beside floor gateways');
  /** Each row's front process: how to start it, and the headers its calls need. */
  const fronts: Array<{ id: string; label: string; headers: Record<string, string>; start(): Promise<Front> }> = [
    {
      id: 'gwc-fn',
      label: 'gateway POST /fn/product_recommender (JSON), engine over its Unix socket',
      headers: { 'x-api-key': BENCH_API_KEY },
      start: async () => {
        const gw = await startGatewayProc('gateway-cpu', engine.grpcSocket);
        return { pid: gw.child.proc.pid!, port: gw.port, stop: () => gw.stop() };
      },
    },
    {
      id: 'gwc-fn-local',
      label: "gateway POST /fn/product_recommender (JSON), ModelInfer over the engine's local channel (--engine-local-socket)",
      headers: { 'x-api-key': BENCH_API_KEY },
      start: async () => {
        const gw = await startGatewayProc('gateway-cpu-local', engine.grpcSocket, [`--engine-local-socket=${localSocket}`]);
        return {
          pid: gw.child.proc.pid!,
          port: gw.port,
          stop: () => gw.stop(),
          // As gateway-hop.ts: the row counts only if the channel carried the window's calls.
          check: async (ok) => {
            const carried = await localChannelCalls(gw.port);
            if (carried < ok) throw new Error(`the local channel carried ${carried} of the ${ok} calls`);
          },
        };
      },
    },
    {
      id: 'gwc-fn-hono',
      label: 'gateway POST /fn/product_recommender (JSON), every call through Hono (--direct-route=false)',
      headers: { 'x-api-key': BENCH_API_KEY },
      start: async () => {
        const gw = await startGatewayProc('gateway-cpu-hono', engine.grpcSocket, ['--direct-route=false']);
        return { pid: gw.child.proc.pid!, port: gw.port, stop: () => gw.stop() };
      },
    },
    {
      id: 'gwc-fastapi',
      label: 'FastAPI + uvicorn (uvloop, httptools) peer, grpcio to the engine over its Unix socket',
      headers: { 'x-api-key': BENCH_API_KEY },
      start: async () => {
        const why = fastapiMissing();
        if (why) throw new Error(why);
        const p = await startFastapiPeer(engine.grpcSocket);
        return { pid: p.child.proc.pid!, port: p.port, stop: () => stopChild(p.child) };
      },
    },
    ...(['grpcjs', 'h2'] as const).map((client) => ({
      id: `gwc-floor-${client}`,
      label: `floor gateway: node:http in, one ModelInfer with ${client === 'h2' ? 'node:http2' : 'grpc-js'} (bytes passed through)`,
      headers: {},
      start: async () => {
        const f = await startFloorGateway(engine, recGrpcBody, client);
        return { pid: f.child.proc.pid!, port: f.port, stop: () => stopChild(f.child) };
      },
    })),
  ];
  if (!which('wrk')) {
    for (const { id, label } of fronts) ctx.gatewayCpu.push({ id, label, skipped: WRK_MISSING });
    return;
  }
  const enginePid = engine.child.proc.pid!;
  const features = Array.from({ length: 64 }, (_, i) => Math.sin(i * 0.1 + 1));
  const body = path.join(dir, 'fn-rec.json');
  writeFileSync(body, JSON.stringify({ inputs: { user_features: { data: features, shape: [1, 64] } } }));
  for (const { id, label, headers, start } of fronts) {
    let front: Awaited<ReturnType<typeof start>>;
    try {
      front = await start();
    } catch (e) {
      const first = (e as Error).message.split('\n')[0]!.slice(0, 300);
      const why = first.startsWith('not measured:') ? first : `its server did not start: ${first}`;
      ctx.log(`  ${label}: NOT MEASURED: ${why}`);
      ctx.gatewayCpu.push({ id, label, skipped: why });
      continue;
    }
    try {
      ctx.gatewayCpu.push(
        await twoProcessRow(
          ctx,
          id,
          label,
          front.pid,
          enginePid,
          secs,
          (s) => wrkPost(front.port, '/fn/product_recommender', body, { 'Content-Type': 'application/json', ...headers }, clients, s, dir),
          front.check,
        ),
      );
    } finally {
      await front.stop();
    }
  }
}
