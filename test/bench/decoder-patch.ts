// A/B of the receive-pool decoder inside grpc-js (one of the reaches in
// engine/frontends/grpc/grpc-js-internals.ts): the engine's CPU per inference
// and its garbage collections with it and without it
// (ENGINE_GRPC_POOLED_DECODER=0), for a tiny and a 10 MiB inline request over
// gRPC: unary ModelInfer on the direct path, ModelStreamInfer (one request
// per stream, served by grpc-js), and unary ModelInfer served by grpc-js
// (ENGINE_GRPC_DIRECT_INFER=0). Load from h2load (no Node client competes
// for the cores). Rows interleaved and variants alternated, so load on a
// shared host falls on both alike; medians over the rounds.
// Usage: node --import tsx test/bench/decoder-patch.ts [rounds] [seconds] [case filter]
import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { bodyDir, grpcFrame, h2loadGrpc } from './c-clients.ts';
import { fp32Bytes } from './calls.ts';
import { cpuSeconds } from './processes.ts';
import { BUNDLED_REPO, startEngineProc, type EngineProc } from './services.ts';
import { writeSumVector } from './shm-vs-inline.ts';

const rounds = Number(process.argv[2] ?? 3);
const secs = Number(process.argv[3] ?? 4);
const only = process.argv[4] ?? '';

/** Minor page faults of a process, all threads (fresh memory touched: a load-independent cost). */
function minorFaults(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[7]);
}
const REC = { model: 'product_recommender_model', input: 'user_features', shape: [1, 64] };
const BIG = { model: 'sum_vector', input: 'x', shape: [(10 * 2 ** 20) / 4] };

interface Engine {
  e: EngineProc;
  gc: { full: number; young: number };
}

async function served(e: EngineProc, model: string): Promise<number> {
  const s = (await e.client.modelStatistics(model)).model_stats[0];
  return Number(s?.inference_stats?.success?.count ?? 0);
}

async function start(name: string, env: Record<string, string>): Promise<Engine> {
  const e = await startEngineProc(name, repo, [], env, 1, ['--trace-gc']);
  const gc = { full: 0, young: 0 };
  e.child.proc.stdout!.on('data', (d: Buffer) => {
    const s = d.toString();
    gc.full += s.match(/Mark-Compact/g)?.length ?? 0;
    gc.young += s.match(/Scavenge/g)?.length ?? 0;
  });
  return { e, gc };
}

const tmp = bodyDir();
const repo = path.join(tmp.dir, 'repo');
mkdirSync(repo);
cpSync(path.join(BUNDLED_REPO, REC.model), path.join(repo, REC.model), { recursive: true });
writeSumVector(repo);
const body = (key: string, m: typeof REC, bytes: Buffer) => {
  const f = path.join(tmp.dir, `${key}.grpc`);
  writeFileSync(
    f,
    grpcFrame({ model_name: m.model, inputs: [{ name: m.input, datatype: 'FP32', shape: m.shape }], raw_input_contents: [bytes] }),
  );
  return f;
};
const tiny = body('tiny', REC, fp32Bytes(64));
const big = body('big', BIG, fp32Bytes(BIG.shape[0]!));

const engines: Record<string, Engine> = {};
try {
  engines['direct+patch'] = await start('ab-dp', {});
  engines['direct-nopatch'] = await start('ab-dn', { ENGINE_GRPC_POOLED_DECODER: '0' });
  engines['grpcjs+patch'] = await start('ab-gp', { ENGINE_GRPC_DIRECT_INFER: '0' });
  engines['grpcjs-nopatch'] = await start('ab-gn', { ENGINE_GRPC_DIRECT_INFER: '0', ENGINE_GRPC_POOLED_DECODER: '0' });
  const cases = [
    { id: 'unary-direct tiny', eng: 'direct', method: 'ModelInfer', file: tiny, model: REC.model, clients: 16 },
    { id: 'unary-direct 10MiB', eng: 'direct', method: 'ModelInfer', file: big, model: BIG.model, clients: 1 },
    { id: 'stream tiny', eng: 'direct', method: 'ModelStreamInfer', file: tiny, model: REC.model, clients: 16 },
    { id: 'stream 10MiB', eng: 'direct', method: 'ModelStreamInfer', file: big, model: BIG.model, clients: 1 },
    { id: 'unary-grpcjs tiny', eng: 'grpcjs', method: 'ModelInfer', file: tiny, model: REC.model, clients: 16 },
    { id: 'unary-grpcjs 10MiB', eng: 'grpcjs', method: 'ModelInfer', file: big, model: BIG.model, clients: 1 },
  ].filter((c) => c.id.includes(only));
  const results = new Map<string, Array<{ cpu: number; full: number; young: number; faults: number }>>();
  for (let r = 0; r < rounds; r++) {
    for (const c of cases) {
      const variants = r % 2 ? ['-nopatch', '+patch'] : ['+patch', '-nopatch'];
      for (const v of variants) {
        const { e, gc } = engines[c.eng + v]!;
        const load = () => h2loadGrpc(e.grpcPort, c.method, c.file, c.clients, secs);
        await load(); // warm-up
        const pid = e.child.proc.pid!;
        const [n0, c0, f0, y0, p0] = [await served(e, c.model), cpuSeconds(pid).total, gc.full, gc.young, minorFaults(pid)];
        await load();
        const n = (await served(e, c.model)) - n0;
        const row = {
          cpu: ((cpuSeconds(pid).total - c0) * 1000) / n,
          full: ((gc.full - f0) * 100) / n,
          young: ((gc.young - y0) * 100) / n,
          faults: (minorFaults(pid) - p0) / n,
        };
        console.log(
          `r${r} ${c.id} ${v}: ${row.cpu.toFixed(3)} ms CPU/inference, ${row.faults.toFixed(0)} page faults/inference, ${row.full.toFixed(1)} mark-compacts and ${row.young.toFixed(0)} scavenges per 100 (${n} inferences)`,
        );
        results.set(`${c.id} ${v}`, [...(results.get(`${c.id} ${v}`) ?? []), row]);
      }
    }
  }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? NaN;
  console.log(
    '\nmedians: engine CPU ms/inference (all threads); page faults/inference; mark-compacts per 100 inferences; scavenges per 100 — with the patch | without',
  );
  for (const c of cases) {
    const a = results.get(`${c.id} +patch`) ?? [];
    const b = results.get(`${c.id} -nopatch`) ?? [];
    const f = (rows: typeof a) =>
      `${med(rows.map((x) => x.cpu)).toFixed(3)} ms, ${med(rows.map((x) => x.faults)).toFixed(0)} PF, ${med(rows.map((x) => x.full)).toFixed(1)} MC, ${med(rows.map((x) => x.young)).toFixed(0)} Sc`;
    console.log(`${c.id.padEnd(20)} ${f(a)} | ${f(b)}`);
  }
} finally {
  for (const { e } of Object.values(engines)) await e.stop();
  tmp.remove();
}
