// Shared by the memory-budget test (L0_budget_rss) and `bench:sharing --scenario`:
// a repository of N copies of the bundled encoder, an engine started as its
// own process (so its RSS is the engine's alone), binary HTTP inference, and
// RSS/statistics readers.
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { freePort, ROOT, spawnTs, waitUntil, type Child } from './processes.ts';

export const ENCODER_ONNX = path.join(ROOT, 'model_repository', 'clip_encoder_model', '1', 'model.onnx');
export const PIXELS = 3 * 224 * 224;

/** `names` copies of the encoder (max batch 16, `instances` instances, one thread each), plus extra config lines. */
export function encoderRepo(names: string[], instances = 2, extra = ''): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sharing-enc-'));
  for (const n of names) {
    mkdirSync(path.join(dir, n, '1'), { recursive: true });
    copyFileSync(ENCODER_ONNX, path.join(dir, n, '1', 'model.onnx'));
    writeFileSync(
      path.join(dir, n, 'config.pbtxt'),
      `name: "${n}"
platform: "onnxruntime_onnx"
max_batch_size: 16
input [ { name: "pixel_values", data_type: TYPE_FP32, dims: [ 3, 224, 224 ] } ]
output [ { name: "image_embeds", data_type: TYPE_FP32, dims: [ 512 ] } ]
instance_group [ { count: ${instances}, kind: KIND_CPU } ]
dynamic_batching { max_queue_delay_microseconds: 2000 }
parameters { key: "intra_op_thread_count" value: { string_value: "1" } }
${extra}
`,
    );
  }
  return dir;
}

export interface EngineProc {
  child: Child;
  http: number;
  metrics: number;
  grpc: number;
  pid: number;
}

/**
 * The engine as a child process (on-demand mode), ready to serve. `onSpawn` runs once the process is started,
 * before it is ready (its caller may do other work while it starts).
 */
export async function spawnEngine(
  repo: string,
  args: string[] = [],
  opts: { cgroupProcs?: string; env?: Record<string, string>; onSpawn?: () => void } = {},
): Promise<EngineProc> {
  const [httpPort, metrics, grpc] = [await freePort(), await freePort(), await freePort()];
  const child = spawnTs(
    'engine',
    'engine/main.ts',
    [
      `--model-repository=${repo}`,
      `--http-port=${httpPort}`,
      `--metrics-port=${metrics}`,
      `--grpc-port=${grpc}`,
      '--model-control-mode=on-demand',
      '--strict-readiness=false',
      ...args,
    ],
    opts.env ?? {},
  );
  // Into the cgroup before it loads anything (its start-up is a few MB, well under any limit used here).
  if (opts.cgroupProcs) writeFileSync(opts.cgroupProcs, String(child.proc.pid));
  opts.onSpawn?.();
  await waitUntil(child, async () => (await fetch(`http://127.0.0.1:${httpPort}/v2/health/ready`)).ok, 60_000);
  return { child, http: httpPort, metrics, grpc, pid: child.proc.pid! };
}

/**
 * spawnEngine for a caller with work to do while the engine starts: `spawned` once its process runs (rejects if
 * the start fails before), `ready` as spawnEngine.
 */
export function spawnEngineMeanwhile(repo: string, args: string[] = []): { spawned: Promise<void>; ready: Promise<EngineProc> } {
  let onSpawn!: () => void;
  const spawned = new Promise<void>((resolve) => (onSpawn = resolve));
  const ready = spawnEngine(repo, args, { onSpawn });
  return { spawned: Promise.race([spawned, ready.then(() => undefined)]), ready };
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

/** One inference of `batch` images (zeros but a seed) over binary HTTP; rejects with the status and body on failure. */
export function inferEncoder(port: number, model: string, batch: number, timeoutMs = 120_000): Promise<void> {
  const bytes = Buffer.alloc(batch * PIXELS * 4);
  bytes.writeFloatLE(Math.random(), 0);
  const head = Buffer.from(
    JSON.stringify({
      inputs: [{ name: 'pixel_values', datatype: 'FP32', shape: [batch, 3, 224, 224], parameters: { binary_data_size: bytes.byteLength } }],
      parameters: { binary_data_output: true },
    }),
  );
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: `/v2/models/${model}/infer`,
        agent,
        timeout: timeoutMs,
        headers: {
          'Content-Type': 'application/octet-stream',
          'Inference-Header-Content-Length': head.byteLength,
          'Content-Length': head.byteLength + bytes.byteLength,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          res.statusCode === 200
            ? resolve()
            : reject(new Error(`HTTP ${res.statusCode}: ${Buffer.concat(chunks).toString().slice(0, 200)}`)),
        );
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('client timeout')));
    req.on('error', reject);
    req.end(Buffer.concat([head, bytes]));
  });
}

export function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}

export interface IndexEntry {
  name: string;
  state: string;
  reason: string;
  resident_bytes?: number;
  load_bytes?: number;
  cold_loads?: number;
  cold_load_ms_total?: number;
  last_cold_load_ms?: number;
  cold_load_room_ms_total?: number;
  cold_load_backend_ms_total?: number;
  cold_load_warmup_ms_total?: number;
  evictions_caused?: number;
  evicted?: number;
}

export async function repoIndex(port: number): Promise<IndexEntry[]> {
  const r = await fetch(`http://127.0.0.1:${port}/v2/repository/index`, { method: 'POST', body: '{}' });
  return (await r.json()) as IndexEntry[];
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]! : NaN;
};

export const mib = (b: number) => (b / 2 ** 20).toFixed(0);
