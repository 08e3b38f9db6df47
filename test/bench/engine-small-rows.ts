// The rows of the engine's small-call benches (engine-small-call.ts and its
// A/B, engine-small-ab.ts): the two request shapes, the connection patterns,
// and h2load driving unary gRPC ModelInfer with one prebuilt request.
import { execFile } from 'node:child_process';
import { which } from './c-clients.ts';

/** The tiny recommender's request: minimal (model, input, raw bytes), and the one the gateway sends (id, version, the output by name). */
export function smallBodies(): Record<'minimal' | 'gateway', object> {
  const bytes = Buffer.from(new Float32Array(Array.from({ length: 64 }, (_, i) => Math.sin(i * 0.1))).buffer);
  const input = { name: 'user_features', datatype: 'FP32', shape: [1, 64] };
  return {
    minimal: { model_name: 'product_recommender_model', inputs: [input], raw_input_contents: [bytes] },
    gateway: {
      model_name: 'product_recommender_model',
      model_version: '',
      id: '0f8fad5b-d9cb-469f-a165-70867728950e',
      inputs: [input],
      outputs: [{ name: 'scores' }],
      raw_input_contents: [bytes],
    },
  };
}

/** Request shape, connections, streams in flight per connection. */
export const ROWS: ReadonlyArray<{ id: string; body: 'minimal' | 'gateway'; c: number; m: number }> = [
  { id: 'minimal c16 m1', body: 'minimal', c: 16, m: 1 },
  { id: 'gateway-shaped c16 m1', body: 'gateway', c: 16, m: 1 },
  { id: 'minimal c4 m1', body: 'minimal', c: 4, m: 1 },
  { id: 'minimal c16 m8', body: 'minimal', c: 16, m: 8 },
  { id: 'gateway-shaped c16 m8', body: 'gateway', c: 16, m: 8 },
];

/**
 * h2load posting the framed request in `bodyFile` to ModelInfer for `secs`
 * (at most `rps` calls/s per connection when given): calls answered and failed.
 */
export function h2load(
  port: number,
  bodyFile: string,
  c: number,
  m: number,
  secs: number,
  rps?: number,
): Promise<{ ok: number; failed: number }> {
  const args = [
    '-c',
    String(c),
    '-m',
    String(m),
    '-t',
    '1',
    '-D',
    String(secs),
    ...(rps ? [`--rps=${rps}`] : []),
    '-d',
    bodyFile,
    '-H',
    'content-type: application/grpc',
    '-H',
    'te: trailers',
    `http://127.0.0.1:${port}/inference.GRPCInferenceService/ModelInfer`,
  ];
  return new Promise((resolve, reject) =>
    execFile(which('h2load')!, args, { timeout: (secs + 30) * 1000 }, (err, out) => {
      if (err) return reject(err);
      const r = /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored/.exec(out);
      if (!r) return reject(new Error(`h2load: ${out.slice(-300)}`));
      resolve({ ok: Number(r[4]), failed: Number(r[5]) + Number(r[6]) });
    }),
  );
}

/** Load `port` with each row's pattern in turn, `secs` in all (at least 1 s each; the engine's JIT settles per pattern). */
export async function warmUp(port: number, files: Record<string, string>, rows: typeof ROWS, secs: number): Promise<void> {
  const each = Math.max(1, Math.round(secs / Math.max(1, rows.length)));
  for (const r of rows.length ? rows : ROWS.slice(0, 1)) await h2load(port, files[r.body]!, r.c, r.m, each);
}
