// No accepted job lost when Redis restarts empty (issue 41): a real engine
// with a slow JS model that writes a mark per run to a file, a gateway with
// one runner, and a private redis-server with no persistence. N jobs are
// accepted (202), then Redis is killed and started again empty before most
// of them ran. The gateway's journal notices (its epoch marker is gone) and
// puts the jobs back with their ids: every job runs exactly once (one mark
// each, no second one later), and those not finished before the loss report
// their result at GET /jobs/<id>. Without the journal the queued jobs were
// gone with Redis and never ran.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEngine } from '../../engine/server/server.ts';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { setQuiet } from '../../common/logger.ts';
import { writeModel } from '../fixtures/test-models.ts';
import { removeDir } from './helpers.ts';
import { TestRedis, waitFor } from './L0_gateway-support.ts';

type Engine = Awaited<ReturnType<typeof startEngine>>;
let dir: string;
let engine: Engine;
let gw: RunningGateway;
let redis: TestRedis;
let marks: string;
const N = 8;

const config = `name: "slow_mark"
backend: "js"
default_model_filename: "model.ts"
max_batch_size: 0
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 1 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 1 ] } ]
`;
const model = (file: string) => `// slow_mark: appends INPUT0 to a file per run after 300 ms (L0_gateway_jobs_journal).
import { appendFileSync } from 'node:fs';
type T = { datatype: string; shape: number[]; data: Uint8Array };
export async function initialize(): Promise<void> {}
export async function execute(requests: Array<{ inputs: Record<string, T> }>) {
  const out = [];
  for (const r of requests) {
    await new Promise((res) => setTimeout(res, 300));
    const t = r.inputs.INPUT0!;
    const v = new Float32Array(Uint8Array.from(t.data).buffer)[0];
    appendFileSync(${JSON.stringify(file)}, v + '\\n');
    out.push({ outputs: { OUTPUT0: { datatype: 'FP32', shape: [1], data: Uint8Array.from(t.data) } } });
  }
  return out;
}
export async function finalize(): Promise<void> {}
`;

beforeAll(async () => {
  setQuiet(true);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-jobs-journal-'));
  marks = path.join(dir, 'marks.txt');
  fs.writeFileSync(marks, '');
  const repo = path.join(dir, 'repo');
  writeModel(repo, 'slow_mark', config, { 'model.ts': model(marks) });
  engine = await startEngine({ modelRepository: repo, grpcPort: 0, httpPort: -1, metricsPort: -1, host: '127.0.0.1' });
  const fnDir = path.join(dir, 'functions');
  fs.mkdirSync(fnDir);
  fs.writeFileSync(path.join(fnDir, 'mark.json'), JSON.stringify({ name: 'mark', target: { model: 'slow_mark' } }));
  redis = await TestRedis.start();
  gw = await startGateway({
    port: 0,
    host: '127.0.0.1',
    engine: `127.0.0.1:${engine.grpcPort}`,
    functions: fnDir,
    shm: false,
    redisUrl: redis.url,
    redisNamespace: `jrn${process.pid}`,
    leaseNamespace: `jrn${process.pid}`,
    jobsConcurrency: 1,
  });
}, 120_000);

afterAll(async () => {
  await gw?.stop();
  await redis?.stop();
  await engine?.stop();
  if (dir) removeDir(dir);
});

const readMarks = () =>
  fs
    .readFileSync(marks, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map(Number)
    .sort((a, b) => a - b);

describe('Redis restarted empty with accepted jobs not yet run (issue 41)', () => {
  it('every accepted job runs exactly once, put back from the gateway journal', async () => {
    const ids: string[] = [];
    for (let i = 0; i < N; i++) {
      const r = await fetch(`http://127.0.0.1:${gw.port}/fn/mark`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Prefer: 'respond-async' },
        body: JSON.stringify({ inputs: { INPUT0: [i] } }),
      });
      expect(r.status).toBe(202);
      ids.push(((await r.json()) as { id: string }).id);
    }
    await redis.stop();
    const ranBefore = readMarks().length;
    expect(ranBefore).toBeLessThan(N / 2); // most jobs had not run when Redis lost them
    await redis.start(); // same port, no data
    await waitFor('every job to run', () => readMarks().length >= N, 30_000, 100);
    await new Promise((r) => setTimeout(r, 2000)); // and none runs a second time
    expect(readMarks()).toEqual(Array.from({ length: N }, (_, i) => i));
    // Jobs that had not finished before the loss report their result from the restored record.
    const states = await Promise.all(
      ids.map(async (id) => {
        const r = await fetch(`http://127.0.0.1:${gw.port}/jobs/${id}`);
        return r.status === 200 ? ((await r.json()) as { status: string }).status : `http ${r.status}`;
      }),
    );
    expect(states.filter((s) => s === 'succeeded').length).toBeGreaterThanOrEqual(N - ranBefore - 1);
  }, 60_000);
});
