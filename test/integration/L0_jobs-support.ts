// The slow marking model of the async-job suites (L0_gateway_jobs_journal,
// L0_gateway_jobs_full): a JS model that waits `delayMs` per request, then
// appends its INPUT0 to a file, so a suite can count exactly which jobs ran
// and how many times.
import fs from 'node:fs';
import path from 'node:path';
import { writeModel } from '../fixtures/test-models.ts';
import { startEngine } from '../../engine/server/server.ts';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import type { GatewayOptions } from '../../gateway/options.ts';

const CONFIG = `name: "slow_mark"
backend: "js"
default_model_filename: "model.ts"
max_batch_size: 0
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 1 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 1 ] } ]
`;

const model = (
  file: string,
  delayMs: number,
) => `// slow_mark: appends INPUT0 to a file per run after ${delayMs} ms (test/integration/L0_jobs-support.ts).
import { appendFileSync } from 'node:fs';
type T = { datatype: string; shape: number[]; data: Uint8Array };
export async function initialize(): Promise<void> {}
export async function execute(requests: Array<{ inputs: Record<string, T> }>) {
  const out = [];
  for (const r of requests) {
    await new Promise((res) => setTimeout(res, ${delayMs}));
    const t = r.inputs.INPUT0!;
    appendFileSync(${JSON.stringify(file)}, new Float32Array(Uint8Array.from(t.data).buffer)[0] + '\\n');
    out.push({ outputs: { OUTPUT0: { datatype: 'FP32', shape: [1], data: Uint8Array.from(t.data) } } });
  }
  return out;
}
export async function finalize(): Promise<void> {}
`;

/**
 * Under `dir`: a repository `repo/` with `slow_mark`, a functions folder `functions/` with `mark` (its target), and the
 * marks file; `readMarks()` gives the INPUT0 of every run so far, sorted.
 */
export function slowMarkSetup(dir: string, delayMs: number): { repo: string; functions: string; readMarks: () => number[] } {
  const marks = path.join(dir, 'marks.txt');
  fs.writeFileSync(marks, '');
  const repo = path.join(dir, 'repo');
  writeModel(repo, 'slow_mark', CONFIG, { 'model.ts': model(marks, delayMs) });
  const functions = path.join(dir, 'functions');
  fs.mkdirSync(functions);
  fs.writeFileSync(path.join(functions, 'mark.json'), JSON.stringify({ name: 'mark', target: { model: 'slow_mark' } }));
  const readMarks = () =>
    fs
      .readFileSync(marks, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map(Number)
      .sort((a, b) => a - b);
  return { repo, functions, readMarks };
}

/** POST /fn/mark with INPUT0 = i, asking for an async call. */
export function submitMark(port: number, i: number): Promise<Response> {
  return fetch(`http://127.0.0.1:${port}/fn/mark`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Prefer: 'respond-async' },
    body: JSON.stringify({ inputs: { INPUT0: [i] } }),
  });
}

/** An engine with `slow_mark` and a gateway serving `mark` with one job runner and no staging, `extra` over that. */
export async function startMarkStack(
  dir: string,
  delayMs: number,
  extra: Partial<GatewayOptions>,
): Promise<{ engine: Awaited<ReturnType<typeof startEngine>>; gw: RunningGateway; readMarks: () => number[] }> {
  const setup = slowMarkSetup(dir, delayMs);
  const engine = await startEngine({ modelRepository: setup.repo, grpcPort: 0, httpPort: -1, metricsPort: -1, host: '127.0.0.1' });
  const gw = await startGateway({
    port: 0,
    host: '127.0.0.1',
    engine: `127.0.0.1:${engine.grpcPort}`,
    functions: setup.functions,
    shm: false,
    jobsConcurrency: 1,
    ...extra,
  });
  return { engine, gw, readMarks: setup.readMarks };
}
