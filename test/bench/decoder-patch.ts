// A/B of the pooled grpc-js message decoder (engine/frontends/grpc/grpc-message-decoder.ts):
// the engine's CPU per inference with it and without it (ENGINE_GRPC_POOLED_DECODER=0),
// for a tiny and a 10 MiB inline request over gRPC: unary ModelInfer on the
// direct path, ModelStreamInfer (one request per stream, served by grpc-js),
// and unary ModelInfer served by grpc-js (ENGINE_GRPC_DIRECT_INFER=0). Rows
// interleaved, variants alternating, so load on the host falls on both alike.
// Usage: node --import tsx test/bench/decoder-patch.ts [rounds] [seconds]
import { cpSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { bodyDir, grpcFrame, h2loadGrpc } from './c-clients.ts';
import { fp32Bytes } from './calls.ts';
import type { BenchContext } from './context.ts';
import { cpuRow } from './cpu-row.ts';
import { BUNDLED_REPO, startEngineProc, type EngineProc } from './services.ts';
import { writeSumVector } from './shm-vs-inline.ts';

const rounds = Number(process.argv[2] ?? 3);
const secs = Number(process.argv[3] ?? 4);
const REC = { model: 'product_recommender_model', input: 'user_features', shape: [1, 64] };
const BIG = { model: 'sum_vector', input: 'x', shape: [(10 * 2 ** 20) / 4] };
const ctx = { log: (s: string) => console.log(s) } as unknown as BenchContext;

async function served(e: EngineProc, model: string): Promise<number> {
  const s = (await e.client.modelStatistics(model)).model_stats[0] as { inference_stats?: { success?: { count?: number } } };
  return Number(s?.inference_stats?.success?.count ?? 0);
}

const tmp = bodyDir();
const repo = path.join(tmp.dir, 'repo');
mkdirSync(repo);
cpSync(path.join(BUNDLED_REPO, REC.model), path.join(repo, REC.model), { recursive: true });
writeSumVector(repo);
const body = (key: string, m: typeof REC, bytes: Buffer) => {
  const f = path.join(tmp.dir, `${key}.grpc`);
  writeFileSync(f, grpcFrame({ model_name: m.model, inputs: [{ name: m.input, datatype: 'FP32', shape: m.shape }], raw_input_contents: [bytes] }));
  return f;
};
const tiny = body('tiny', REC, fp32Bytes(64));
const big = body('big', BIG, fp32Bytes(BIG.shape[0]!));

const engines: Record<string, EngineProc> = {};
try {
  engines['direct+patch'] = await startEngineProc('ab-dp', repo);
  engines['direct-nopatch'] = await startEngineProc('ab-dn', repo, [], { ENGINE_GRPC_POOLED_DECODER: '0' });
  engines['grpcjs+patch'] = await startEngineProc('ab-gp', repo, [], { ENGINE_GRPC_DIRECT_INFER: '0' });
  engines['grpcjs-nopatch'] = await startEngineProc('ab-gn', repo, [], { ENGINE_GRPC_DIRECT_INFER: '0', ENGINE_GRPC_POOLED_DECODER: '0' });
  const cases = [
    { id: 'unary-direct tiny', eng: 'direct', method: 'ModelInfer', file: tiny, model: REC.model, clients: 16 },
    { id: 'unary-direct 10MiB', eng: 'direct', method: 'ModelInfer', file: big, model: BIG.model, clients: 1 },
    { id: 'stream tiny', eng: 'direct', method: 'ModelStreamInfer', file: tiny, model: REC.model, clients: 16 },
    { id: 'stream 10MiB', eng: 'direct', method: 'ModelStreamInfer', file: big, model: BIG.model, clients: 1 },
    { id: 'unary-grpcjs tiny', eng: 'grpcjs', method: 'ModelInfer', file: tiny, model: REC.model, clients: 16 },
    { id: 'unary-grpcjs 10MiB', eng: 'grpcjs', method: 'ModelInfer', file: big, model: BIG.model, clients: 1 },
  ];
  const results = new Map<string, number[]>();
  for (let r = 0; r < rounds; r++) {
    for (const c of cases) {
      const variants = r % 2 ? ['-nopatch', '+patch'] : ['+patch', '-nopatch'];
      for (const v of variants) {
        const e = engines[c.eng + v]!;
        const row = await cpuRow(ctx, e.child.proc.pid!, c.id, `r${r} ${c.id} ${v}`, () => h2loadGrpc(e.grpcPort, c.method, c.file, c.clients, secs), () => served(e, c.model));
        if (row.cpuMs !== undefined) results.set(`${c.id} ${v}`, [...(results.get(`${c.id} ${v}`) ?? []), row.cpuMs]);
      }
    }
  }
  console.log('\nmedian engine CPU ms per inference (all threads): with patch / without / without-with');
  for (const c of cases) {
    const med = (xs: number[] = []) => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? NaN;
    const a = med(results.get(`${c.id} +patch`));
    const b = med(results.get(`${c.id} -nopatch`));
    console.log(`${c.id.padEnd(22)} ${a.toFixed(3)}  ${b.toFixed(3)}  ${(b - a).toFixed(3)}   (runs: ${results.get(`${c.id} +patch`)?.map((x) => x.toFixed(3)).join(' ')} | ${results.get(`${c.id} -nopatch`)?.map((x) => x.toFixed(3)).join(' ')})`);
  }
} finally {
  for (const e of Object.values(engines)) await e.stop();
  tmp.remove();
}
