// `npm run bench [-- --quick] [-- --out DIR]`: starts everything it measures
// (baseline servers, engines, gateways) as child processes on free ports,
// runs every row one after the other (never two loads at once: 2 cores),
// stops everything, writes DIR/latest.md and DIR/latest.svg (default
// test/bench/results/) and prints the report.
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { makeJpeg } from '../fixtures/images.ts';
import { ENCODER_CLIENTS, PIPELINE_CLIENTS, ROW_INFO, SMALL_CLIENTS, type BenchContext } from './context.ts';
import { baselinePhase } from './phase-baseline.ts';
import { cpuPhase } from './phase-cpu.ts';
import { smallGatewayPhase } from './phase-gateway-small.ts';
import { enginePhase } from './phase-engine.ts';
import { memoryPhase } from './phase-memory.ts';
import { ocrPhase } from './phase-ocr.ts';
import { streamPhase } from './phase-stream.ts';
import { shmPhase } from './phase-shm.ts';
import { ROOT, stopAll } from './processes.ts';
import { computeRatios } from './ratios.ts';
import { renderMarkdown, renderSvg, type Row } from './report.ts';
import { closeHttpAgent } from './services.ts';

/** Pipeline images: 640×480 JPEGs (quality 90) of distinct seeded patterns, sent round robin. */
const IMAGE_W = 640;
const IMAGE_H = 480;
const IMAGE_COUNT = 8;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { quick: { type: 'boolean', default: false }, out: { type: 'string' }, only: { type: 'string' } },
  });
  const quick = values.quick!;
  const outDir = path.resolve(values.out ?? path.join(ROOT, 'test/bench/results'));
  const startedAt = new Date();
  const t0 = performance.now();
  const loadBefore = os.loadavg();
  const images = await Promise.all(Array.from({ length: IMAGE_COUNT }, (_, i) => makeJpeg(IMAGE_W, IMAGE_H, i + 1)));
  const ctx: BenchContext = {
    quick,
    warmupMs: quick ? 300 : 2000,
    durationMs: quick ? 1200 : 8000,
    images,
    rows: new Map(),
    memory: [],
    cpu: [],
    floors: [],
    gatewayCpu: [],
    notes: [],
    values: new Map(),
    log: (line) => process.stderr.write(`[bench ${((performance.now() - t0) / 1000).toFixed(1)}s] ${line}\n`),
  };
  ctx.log(`${quick ? 'quick' : 'full'} run: warm-up ${ctx.warmupMs} ms, window ${ctx.durationMs} ms per row`);

  const stopOnSignal = () => {
    void stopAll().finally(() => process.exit(130));
  };
  process.once('SIGINT', stopOnSignal);
  process.once('SIGTERM', stopOnSignal);
  try {
    // --only=cpu,engine,... runs some phases (for iterating on one figure); the report marks the rest not run.
    const want = (p: string) => !values.only || values.only.split(',').includes(p);
    if (want('baseline')) await baselinePhase(ctx);
    if (want('engine')) await enginePhase(ctx);
    if (want('shm')) await shmPhase(ctx);
    if (want('cpu')) await cpuPhase(ctx);
    // Only on request (the engine phase measures the same rows among the others).
    if (values.only?.split(',').includes('gateway')) await smallGatewayPhase(ctx);
    if (want('memory')) await memoryPhase(ctx);
    if (want('ocr')) await ocrPhase(ctx);
    if (want('stream')) await streamPhase(ctx);
  } finally {
    await stopAll();
    closeHttpAgent();
  }

  const row = (id: string): Row => ctx.rows.get(id) ?? { id, ...ROW_INFO[id]!, skipped: 'not run' };
  const avgKiB = images.reduce((a, b) => a + b.byteLength, 0) / images.length / 1024;
  const data = {
    quick,
    startedAt,
    seconds: (performance.now() - t0) / 1000,
    loadBefore,
    loadAfter: os.loadavg(),
    settings: [
      `each closed-loop row: ${ctx.warmupMs} ms warm-up (not measured), then a ${ctx.durationMs} ms window; latencies from an HDR histogram (hdr-histogram-js), µs resolution`,
      `rows run one at a time, the two sides of each ratio back to back; clients run in this process, every server is its own child process (\`node --import tsx\`); the two engines (batching on / off) and the gateway are up together, idle when not measured`,
      `pipeline input: ${IMAGE_COUNT} JPEGs ${IMAGE_W}×${IMAGE_H} (avg ${avgKiB.toFixed(0)} KiB), round robin; concurrency ${PIPELINE_CLIENTS} (pipeline), ${ENCODER_CLIENTS} (encoder), ${SMALL_CLIENTS} (recommender)`,
      'engine: bundled model_repository/ (clip_encoder_model 2 instances × 1 intra-op thread, dynamic batching preferred 4/8/16, 2 ms window); "batching off" = a temp copy without the dynamic_batching blocks',
      'gRPC load rows: each client on its own connection (grpc-js channel with a local subchannel pool), like the HTTP clients, which get a keep-alive socket each; 1-client rows reuse one warm channel',
      "the gateway reaches its engine over the engine's Unix-socket gRPC listener (--grpc-unix-socket), as under `npm start`; the direct rows use TCP",
      'section 6 (engine CPU per inference) loads a separate engine (encoder, recommender, sum_vector) from C clients: h2load for gRPC, wrk for HTTP; then its floors: the same clients and bodies against test/bench/floor-server.ts (node:http2, @grpc/grpc-js, node:http), which reads each body and answers a fixed reply',
      "open-loop rate: half of (a)'s closed-loop throughput, the same rate for (a) and (c)",
    ],
    pipeline: ['a', 'b', 'c', 'd'].map(row),
    openLoop: ['ol-a', 'ol-c'].map(row),
    ratios: computeRatios(ctx),
    rows: Object.keys(ROW_INFO)
      .filter((id) => !['a', 'b', 'c', 'd', 'ol-a', 'ol-c'].includes(id))
      .map(row),
    memory: ctx.memory,
    cpu: ctx.cpu,
    floors: ctx.floors,
    gatewayCpu: ctx.gatewayCpu,
    copyMs: ctx.values.get('copy-10mib-ms'),
    notes: [
      ...ctx.notes,
      'the raw ceiling gives ONNX Runtime both cores and nothing else; every engine row shares the same 2 cores with its client (this process), the request path (gRPC, batching, worker messages) and, for bytes on the wire, the 588 KiB FP32 copy per image',
      "the per-model servers and the engine all run under tsx, so each pays the same Node + tsx base; the stand-in models are small (encoder 2 MB of weights), so that base, not the weights, is most of every process's memory",
      "ratios between rows come from one run, with the two sides measured back to back, but other processes on this host (other sessions' tests) may compete for the 2 cores and shift one side more than the other: compare the load averages above",
    ],
  };
  const md = renderMarkdown(data);
  mkdirSync(outDir, { recursive: true });
  writeFileSync(path.join(outDir, 'latest.md'), md);
  writeFileSync(path.join(outDir, 'latest.svg'), renderSvg(data));
  process.stdout.write(`${md}\n`);
  ctx.log(`wrote ${path.join(outDir, 'latest.md')} and latest.svg`);
}

main().then(
  () => process.exit(0),
  async (e) => {
    process.stderr.write(`bench failed: ${(e as Error).stack ?? e}\n`);
    await stopAll();
    process.exit(1);
  },
);
