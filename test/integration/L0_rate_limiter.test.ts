// Triton's rate limiter on the real engine: two js models whose instances
// declare the same resource never execute at once (each execution records its
// start and end), they do overlap without --rate-limit, and a priority of 2
// against 1 halves a busy model's share of turns.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { EngineOptions, RunningEngine } from '../../engine/server/server.ts';
import { f32Bytes, removeDir, startTestEngine, tempRepo } from './helpers.ts';

const LOG = `__rateLimiterLog_${process.pid}`;

const MODEL = `let model = '';
export function initialize(ctx: { modelName: string }) { model = ctx.modelName; }
export async function execute(requests: Array<{ inputs: Record<string, { datatype: string; shape: number[]; data: Uint8Array }> }>) {
  const log = ((globalThis as Record<string, unknown>)['${LOG}'] ??= []) as Array<{ model: string; start: number; end: number }>;
  const start = performance.now();
  await new Promise((r) => setTimeout(r, 8));
  log.push({ model, start, end: performance.now() });
  return requests.map((r) => ({ outputs: { OUTPUT0: { shape: r.inputs.INPUT0!.shape, data: r.inputs.INPUT0!.data } } }));
}
`;
const config = (name: string, priority: number) => `name: "${name}"
backend: "js"
default_model_filename: "model.ts"
max_batch_size: 0
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
instance_group [ { count: 2, kind: KIND_CPU, rate_limiter { resources [ { name: "R", count: 1 } ] priority: ${priority} } } ]
`;

type Entry = { model: string; start: number; end: number };
const log = (): Entry[] => ((globalThis as Record<string, unknown>)[LOG] ??= []) as Entry[];

const repos: string[] = [];
const engines: RunningEngine[] = [];
afterAll(async () => {
  for (const e of engines) await e.stop();
  for (const r of repos) removeDir(r);
});

/** Start an engine over rl_a (priority pa) and rl_b (pb), send n requests to each at once, return the executions in start order. */
async function run(pa: number, pb: number, n: number, opts: Partial<EngineOptions>): Promise<Entry[]> {
  const repo = tempRepo('l0-rl');
  repos.push(repo);
  for (const [name, p] of [
    ['rl_a', pa],
    ['rl_b', pb],
  ] as const) {
    mkdirSync(path.join(repo, name, '1'), { recursive: true });
    writeFileSync(path.join(repo, name, 'config.pbtxt'), config(name, p));
    writeFileSync(path.join(repo, name, '1', 'model.ts'), MODEL);
  }
  const e = await startTestEngine({ modelRepository: repo, ...opts });
  engines.push(e);
  log().length = 0;
  const req = (model: string) =>
    e.server.infer({
      modelName: model,
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1], data: new Uint8Array(f32Bytes([1])) }],
      outputs: [],
      parameters: {},
    });
  await Promise.all(Array.from({ length: n }, () => [req('rl_a'), req('rl_b')]).flat());
  const out = [...log()].sort((x, y) => x.start - y.start);
  await e.stop();
  return out;
}

const overlaps = (es: Entry[]) => es.filter((e, i) => i > 0 && e.start < es[i - 1]!.end).length;

describe('rate limiter', () => {
  it('never runs two instances holding the same resource at once; they overlap without it', async () => {
    const limited = await run(1, 1, 10, { rateLimit: 'execution_count' });
    expect(limited).toHaveLength(20);
    expect(overlaps(limited)).toBe(0);
    const free = await run(1, 1, 10, { rateLimit: 'off' });
    expect(overlaps(free)).toBeGreaterThan(5);
  });

  it('priority 2 gets about half the turns of priority 1 while both are busy', async () => {
    const n = 18;
    const share = (es: Entry[]) => es.slice(0, n).filter((e) => e.model === 'rl_a').length / n;
    const equal = share(await run(1, 1, n, { rateLimit: 'execution_count' }));
    const weighted = share(await run(1, 2, n, { rateLimit: 'execution_count' }));
    expect(equal).toBeGreaterThan(0.4);
    expect(equal).toBeLessThan(0.6);
    expect(weighted).toBeGreaterThan(0.6);
    expect(weighted).toBeLessThan(0.75);
  });

  it('an explicit --rate-limit-resource count below what an instance needs fails that model only', async () => {
    const repo = tempRepo('l0-rl-bad');
    repos.push(repo);
    mkdirSync(path.join(repo, 'rl_a', '1'), { recursive: true });
    writeFileSync(path.join(repo, 'rl_a', 'config.pbtxt'), config('rl_a', 1).replace('count: 1 }', 'count: 3 }'));
    writeFileSync(path.join(repo, 'rl_a', '1', 'model.ts'), MODEL);
    const e = await startTestEngine({ modelRepository: repo, rateLimit: 'execution_count', rateLimitResources: [{ name: 'R', count: 2 }] });
    engines.push(e);
    const idx = e.server.repositoryIndex(false).find((m) => m.name === 'rl_a')!;
    expect(idx.state).toBe('UNAVAILABLE');
    expect(idx.reason).toMatch(/'R' has 2 copies but an instance needs 3/);
  });
});
