// One 10 MB FP32 input through system shared memory versus the same bytes in
// raw_input_contents, over gRPC to the real engine (started in this process
// on port 0), on a model that reads every byte and answers 4 bytes
// (sum_vector: ReduceSum over x[N]). Prints one line: p50/p95 of each path and
// the p50 ratio. Run: npx tsx test/bench/shm-vs-inline.ts [--quick]
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { startEngine } from '../../engine/server/server.ts';
import { ElemType, GraphBuilder } from '../../model_repository/onnx-builder.ts';
import { createSharedMemoryRegion, destroySharedMemoryRegion, setSharedMemoryRegion } from '../../client/shared-memory.ts';
import { protoLoaderClient, seededFloats, toF32 } from '../integration/helpers.ts';
import { newHistogram, recordMs, summarize } from './load-generator.ts';

export interface ShmVsInlineOptions {
  /** Fewer iterations (CI smoke). */
  quick?: boolean;
  /** Input size in bytes (default 10 MiB). */
  bytes?: number;
  shmIterations?: number;
  inlineIterations?: number;
}

export interface Percentiles {
  p50: number;
  p95: number;
}

export interface ShmVsInlineResult {
  shmMs: Percentiles;
  inlineMs: Percentiles;
  /** shm p50 / inline p50. */
  ratio: number;
  /** The shm path plus the client's copy of the tensor into the region each call. */
  shmWithCopyMs: Percentiles;
  bytes: number;
}

const MODEL = 'sum_vector';

/** sum_vector (ReduceSum over x[N], FP32, no batching) written into `repo`. */
export function writeSumVector(repo: string): void {
  const g = new GraphBuilder(MODEL, 1);
  g.input('x', ElemType.FLOAT, ['n']);
  g.node('ReduceSum', ['x'], { keepdims: 1 }, 'sum');
  g.output('sum', ElemType.FLOAT, [1]);
  mkdirSync(path.join(repo, MODEL, '1'), { recursive: true });
  writeFileSync(path.join(repo, MODEL, '1', 'model.onnx'), g.build());
  writeFileSync(
    path.join(repo, MODEL, 'config.pbtxt'),
    `name: "${MODEL}"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "x", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "sum", data_type: TYPE_FP32, dims: [ 1 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
`,
  );
}

function percentiles(ms: number[]): Percentiles {
  const h = newHistogram();
  for (const v of ms) recordMs(h, v);
  const r = summarize(h, ms.length, 0, 0);
  return { p50: r.p50, p95: r.p95 };
}

async function time(n: number, fn: () => Promise<void>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await fn();
    out.push(performance.now() - t0);
  }
  return out;
}

/** Measure both paths once, in this process; the engine and its temp repository are gone when it returns. */
export async function benchShmVsInline(opts: ShmVsInlineOptions = {}): Promise<ShmVsInlineResult> {
  const bytes = opts.bytes ?? 10 * 1024 * 1024;
  const n = Math.floor(bytes / 4);
  const shmIters = opts.shmIterations ?? (opts.quick ? 40 : 200);
  const inlineIters = opts.inlineIterations ?? (opts.quick ? 8 : 30);
  const repo = mkdtempSync(path.join(os.tmpdir(), 'bench-shm-'));
  writeSumVector(repo);
  const engine = await startEngine({
    modelRepository: repo,
    grpcPort: 0,
    httpPort: -1,
    metricsPort: -1,
    host: '127.0.0.1',
    allowClientShm: true,
  });
  const client = protoLoaderClient(engine.grpcPort);
  const name = 'bench_input';
  const region = createSharedMemoryRegion(name, `/bench_shm_vs_inline_${process.pid}`, n * 4, { touch: true });
  try {
    const x = seededFloats(n, 17, 0, 1);
    const raw = Buffer.from(x.buffer, x.byteOffset, x.byteLength);
    setSharedMemoryRegion(region, [x]);
    await client.call('SystemSharedMemoryRegister', { name, key: region.key, offset: 0, byte_size: n * 4 });
    const input = { name: 'x', datatype: 'FP32', shape: [n] };
    const shmReq = {
      model_name: MODEL,
      inputs: [{ ...input, parameters: { shared_memory_region: { string_param: name }, shared_memory_byte_size: { int64_param: n * 4 } } }],
    };
    const inlineReq = { model_name: MODEL, inputs: [input], raw_input_contents: [raw] };
    const sumOf = async (req: object) => toF32((await client.call<any>('ModelInfer', req, 120_000)).raw_output_contents[0])[0]!;

    // Same bytes, same answer (and warm-up: the worker maps the region once, pages touched).
    const a = await sumOf(shmReq);
    const b = await sumOf(inlineReq);
    if (a !== b) throw new Error(`shm and inline sums differ: ${a} vs ${b}`);
    // grpc-js unary calls get faster over the first few hundred calls (measured): warm the channel.
    await time(opts.quick ? 60 : 300, async () => void (await sumOf(shmReq)));
    await time(2, async () => void (await sumOf(inlineReq)));

    const shm = await time(shmIters, async () => void (await sumOf(shmReq)));
    const shmCopy = await time(Math.min(shmIters, 50), async () => {
      setSharedMemoryRegion(region, [x]);
      await sumOf(shmReq);
    });
    const inline = await time(inlineIters, async () => void (await sumOf(inlineReq)));
    const shmMs = percentiles(shm);
    const inlineMs = percentiles(inline);
    await client.call('SystemSharedMemoryUnregister', { name });
    return { shmMs, inlineMs, ratio: shmMs.p50 / inlineMs.p50, shmWithCopyMs: percentiles(shmCopy), bytes: n * 4 };
  } finally {
    client.close();
    await engine.stop();
    destroySharedMemoryRegion(region);
    rmSync(repo, { recursive: true, force: true });
  }
}

/** The one line the script prints. */
export function formatShmVsInline(r: ShmVsInlineResult): string {
  const f = (p: Percentiles) => `p50 ${p.p50.toFixed(2)} ms, p95 ${p.p95.toFixed(2)} ms`;
  return (
    `shm-vs-inline: ${(r.bytes / 2 ** 20).toFixed(1)} MiB FP32 input over gRPC: shm ${f(r.shmMs)} | ` +
    `raw_input_contents ${f(r.inlineMs)} | ratio shm/inline (p50) ${r.ratio.toFixed(3)} (target <= 0.05) | ` +
    `shm incl. client copy into the region ${f(r.shmWithCopyMs)}`
  );
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const r = await benchShmVsInline({ quick: process.argv.includes('--quick') });
  console.log(formatShmVsInline(r));
}
