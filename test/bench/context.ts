// What the phases of one bench run share: the mode, the measurement windows,
// the input images, and where every result goes.
import type { LoadResult } from './load-generator.ts';
import { cpuSeconds } from './processes.ts';
import type { CpuRow, GatewayCpuRow } from './report-cpu.ts';
import type { MemoryRow, Row } from './report.ts';

/** Closed-loop concurrency of the pipeline table (a)-(d) and its ratios. */
export const PIPELINE_CLIENTS = 16;
/** Concurrency of the encoder rows (the ceiling keeps 2 x 16 images in flight). */
export const ENCODER_CLIENTS = 32;
/** Concurrency of the small-model rows (recommender, gateway vs direct). */
export const SMALL_CLIENTS = 16;

const closed = (n: number) => `closed loop, ${n} client${n === 1 ? '' : 's'}`;

/** Every load row of the report: id -> label and load. */
export const ROW_INFO: Record<string, { label: string; load: string }> = {
  a: { label: 'baseline: one HTTP server per model, JSON tensors', load: closed(PIPELINE_CLIENTS) },
  b: { label: 'engine, search_pipeline_ensemble, batching off', load: closed(PIPELINE_CLIENTS) },
  c: { label: 'engine, search_pipeline_ensemble, dynamic batching', load: closed(PIPELINE_CLIENTS) },
  d: { label: 'gateway POST /fn/search_pipeline_ensemble → engine (c)', load: closed(PIPELINE_CLIENTS) },
  'ol-a': { label: '(a) baseline, open loop', load: 'open loop' },
  'ol-c': { label: '(c) engine with batching, open loop', load: 'open loop' },
  ceiling: { label: 'raw ORT ceiling: clip encoder, 2 worker sessions × batch 16', load: 'closed loop, 2 × batch 16 in flight (images/s)' },
  'enc-batch': { label: 'engine clip_encoder_model over gRPC, dynamic batching', load: `${closed(ENCODER_CLIENTS)}, batch 1 each` },
  'enc-shm': {
    label: 'engine clip_encoder_model, dynamic batching, inputs in client shm (no tensor bytes on the wire)',
    load: `${closed(ENCODER_CLIENTS)}, batch 1 each`,
  },
  'enc-nobatch': { label: 'engine clip_encoder_model over gRPC, batching off', load: `${closed(ENCODER_CLIENTS)}, batch 1 each` },
  'pre-alone': { label: 'engine image_preprocess_model alone over gRPC', load: closed(PIPELINE_CLIENTS) },
  'rec-batch': { label: 'engine product_recommender_model over gRPC, dynamic batching', load: `${closed(SMALL_CLIENTS)}, batch 1 each` },
  'rec-nobatch': { label: 'engine product_recommender_model over gRPC, batching off', load: `${closed(SMALL_CLIENTS)}, batch 1 each` },
  'gw-rec': {
    label: 'gateway POST /fn/product_recommender (JSON) → engine, dynamic batching',
    load: `${closed(SMALL_CLIENTS)}, batch 1 each`,
  },
  'rec-c1-batch': { label: 'engine product_recommender_model over gRPC, dynamic batching, 1 client', load: closed(1) },
  'gw-rec-c1': { label: 'gateway POST /fn/product_recommender (JSON) → engine, dynamic batching, 1 client', load: closed(1) },
  'rec-c1-engine': { label: 'engine product_recommender_model over gRPC, batching off, 1 client', load: closed(1) },
  'rec-c1-raw': { label: 'raw in-process session.run, product_recommender_model, batch 1', load: 'sequential on one thread' },
  'large-staged': { label: 'gateway, large JPEG, staged through shm (default threshold)', load: closed(1) },
  'large-inline': { label: 'gateway, large JPEG, forced inline (--shm=false)', load: closed(1) },
  'ocr-raw': {
    label: 'OCR raw ceiling: PP-OCRv4 det + rec run in-process by a plain loop (same processing code)',
    load: 'sequential, 1 image at a time',
  },
  'ocr-c1': { label: 'engine ocr_pipeline_ensemble over gRPC, 1 client', load: closed(1) },
  'ocr-engine': { label: 'engine ocr_pipeline_ensemble over gRPC', load: closed(4) },
  'ocr-gw': { label: 'gateway POST /fn/ocr → engine', load: closed(4) },
};

export interface BenchContext {
  quick: boolean;
  warmupMs: number;
  durationMs: number;
  /** JPEGs of the pipeline rows, sent round robin. */
  images: Buffer[];
  rows: Map<string, Row>;
  memory: MemoryRow[];
  /** Engine CPU per inference by path (phase-cpu.ts). */
  cpu: CpuRow[];
  /** The same clients and bodies against a Node server that does nothing (cpu-floors.ts). */
  floors: CpuRow[];
  /** The gateway's small call and two floor gateways from wrk (cpu-gateway.ts). */
  gatewayCpu: GatewayCpuRow[];
  notes: string[];
  /** Scalar results that are not load rows (e.g. shm vs inline). */
  values: Map<string, number>;
  log(line: string): void;
}

/** Run one measurement into `ctx.rows[id]`; a failure is recorded as "not measured", never thrown. */
export async function measure(
  ctx: BenchContext,
  id: string,
  run: () => Promise<LoadResult>,
  note?: string,
  load?: string,
): Promise<LoadResult | undefined> {
  const t = performance.now();
  const info = ROW_INFO[id];
  if (!info) throw new Error(`unknown bench row '${id}'`);
  const label = info.label;
  load ??= info.load;
  try {
    const result = await run();
    if (result.requests === 0) throw new Error(`no request completed${result.firstError ? `: ${result.firstError}` : ''}`);
    ctx.rows.set(id, { id, label, load, result, note });
    ctx.log(
      `  ${label}: p50 ${result.p50.toFixed(2)} ms, p95 ${result.p95.toFixed(2)} ms, ${result.throughput.toFixed(1)}/s (${((performance.now() - t) / 1000).toFixed(1)} s)`,
    );
    return result;
  } catch (e) {
    const why = (e as Error).message.split('\n')[0]!.slice(0, 200);
    ctx.rows.set(id, { id, label, load, skipped: why, note });
    ctx.log(`  ${label}: NOT MEASURED: ${why}`);
    return undefined;
  }
}

/** Mark rows a phase could not reach (e.g. its server did not start) as not measured. */
export function skipRows(ctx: BenchContext, why: string, ids: string[]): void {
  for (const id of ids) {
    const info = ROW_INFO[id]!;
    if (!ctx.rows.has(id)) ctx.rows.set(id, { id, label: info.label, load: info.load, skipped: why });
  }
}

/**
 * Wrap a row's run to also note where the CPU went: average cores busy in
 * this process (the clients) and in each given process (its main thread and
 * the rest: worker threads, libuv, GC) over the whole run, and that divided
 * by the throughput as ≈ CPU ms per request.
 */
export function withCpu(
  procs: Array<[name: string, pid: number]>,
  run: () => Promise<LoadResult>,
  onNote: (note: string) => void,
): () => Promise<LoadResult> {
  return async () => {
    const t0 = performance.now();
    const c0 = process.cpuUsage();
    const p0 = procs.map(([, pid]) => cpuSeconds(pid));
    const result = await run();
    const wall = (performance.now() - t0) / 1000;
    const c = process.cpuUsage(c0);
    const parts = [`client ${((((c.user + c.system) / 1e6 / wall) * 1000) / result.throughput).toFixed(2)}`];
    procs.forEach(([name, pid], i) => {
      const p = cpuSeconds(pid);
      const main = (p.main - p0[i]!.main) / wall;
      const rest = (p.total - p0[i]!.total) / wall - main;
      parts.push(
        `${name} main thread ${((main * 1000) / result.throughput).toFixed(2)} + other threads ${((rest * 1000) / result.throughput).toFixed(2)}`,
      );
    });
    onNote(`≈ CPU ms per request: ${parts.join('; ')}`);
    return result;
  };
}

/** measure() with withCpu(): the row's note gets the CPU split (after `note`, if any). */
export async function measureWithCpu(
  ctx: BenchContext,
  id: string,
  procs: Array<[name: string, pid: number]>,
  run: () => Promise<LoadResult>,
  note?: string,
  load?: string,
): Promise<void> {
  let cpu = '';
  await measure(
    ctx,
    id,
    withCpu(procs, run, (n) => (cpu = n)),
    note,
    load,
  );
  const row = ctx.rows.get(id);
  if (row?.result) row.note = [row.note, cpu].filter(Boolean).join('; ');
}
