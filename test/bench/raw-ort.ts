// Raw in-process ONNX Runtime figures, no engine in between: the throughput
// ceiling of N worker threads each owning a session of the same file (the
// engine's own layout: one session per instance, intra-op 1, spinning off),
// and the latency of session.run on this thread for the per-request overhead.
import * as ort from 'onnxruntime-node';
import { spawnWorker } from '../../engine/backends/onnxruntime/spawn-worker.ts';
import { newHistogram, recordMs, summarize, type LoadResult } from './load-generator.ts';

/** The engine's session options for intra/inter-op 1 and no spinning (engine/backends/onnxruntime/onnxruntime-backend.ts). */
export const SESSION_OPTIONS = {
  intraOpNumThreads: 1,
  interOpNumThreads: 1,
  executionMode: 'sequential',
  graphOptimizationLevel: 'all',
  executionProviders: ['cpu'],
  extra: { session: { intra_op: { allow_spinning: '0' }, inter_op: { allow_spinning: '0' } } },
} as const;

export interface CeilingOptions {
  modelPath: string;
  inputName: string;
  /** Per-sample shape without the batch dimension. */
  sampleShape: number[];
  workers: number;
  batch: number;
  warmupMs: number;
  durationMs: number;
}

/**
 * Closed loop of `batch`-sized runs on `workers` sessions in parallel;
 * throughput in samples/s over the window, latencies per batch run.
 */
export async function rawCeiling(o: CeilingOptions): Promise<LoadResult> {
  const url = new URL('./raw-ort-worker.ts', import.meta.url);
  const workers = Array.from({ length: o.workers }, () =>
    spawnWorker(url, {
      modelPath: o.modelPath,
      inputName: o.inputName,
      shape: [o.batch, ...o.sampleShape],
      sessionOptions: SESSION_OPTIONS,
    }),
  );
  try {
    const message = (w: (typeof workers)[number]) =>
      new Promise<any>((resolve, reject) => {
        w.once('message', resolve);
        w.once('error', reject);
      });
    await Promise.all(workers.map(message));
    const results = await Promise.all(
      workers.map((w) => {
        const p = message(w);
        w.postMessage({ warmupMs: o.warmupMs, durationMs: o.durationMs });
        return p as Promise<{ latencies: number[] }>;
      }),
    );
    const h = newHistogram();
    let runs = 0;
    for (const r of results) {
      runs += r.latencies.length;
      for (const ms of r.latencies) recordMs(h, ms);
    }
    return summarize(h, runs, 0, o.durationMs / 1000, o.batch);
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

/** Sequential session.run on this thread with one fixed batch-1 input: latency per run. */
export async function rawSessionLatency(
  modelPath: string,
  inputName: string,
  sampleShape: number[],
  warmup: number,
  iterations: number,
): Promise<LoadResult> {
  const session = await ort.InferenceSession.create(modelPath, SESSION_OPTIONS as unknown as ort.InferenceSession.SessionOptions);
  try {
    const shape = [1, ...sampleShape];
    const data = new Float32Array(shape.reduce((a, b) => a * b, 1)).map((_, i) => Math.cos(i));
    const feeds = { [inputName]: new ort.Tensor('float32', data, shape) };
    const h = newHistogram();
    const t = performance.now();
    for (let i = 0; i < warmup + iterations; i++) {
      const t0 = performance.now();
      await session.run(feeds);
      if (i >= warmup) recordMs(h, performance.now() - t0);
    }
    return summarize(h, iterations, 0, (performance.now() - t) / 1000);
  } finally {
    await session.release();
  }
}
