// `npm run bench:delivery`: what the canary split and the usage-plan check add
// to the gateway's CPU per call (issue 40 asks < 0.01 ms each), side by side
// with the same call without them. In one process on the real code: the
// rollout manager's run() around a call that answers at once (so only the
// hook's own work is timed) with no rollout and with a 50 % canary, and the
// plan check with no plan, with plans but none for the key, and with a plan
// admitted by the real Lua script in a real redis-server (16 calls in
// flight, as a loaded gateway has them). CPU per call = process.cpuUsage
// over the run / calls; the Redis server's own CPU is not the gateway's.
import { spawn } from 'node:child_process';
import { RolloutManager } from '../../gateway/delivery/rollout-manager.ts';
import { MemoryRolloutStore } from '../../gateway/delivery/rollout-store.ts';
import type { RolloutRecord } from '../../gateway/delivery/rollout-spec.ts';
import { RolloutRequestSchema } from '../../gateway/delivery/rollout-spec.ts';
import { RedisPlanStore } from '../../gateway/plans/plan-store.ts';
import { UsagePlans } from '../../gateway/plans/plan-gate.ts';
import { keyId } from '../../gateway/plans/usage-plan.ts';
import type { ResolvedFunction } from '../../gateway/calls/function-registry.ts';
import { FunctionDefinitionSchema } from '../../gateway/calls/function-schema.ts';
import { freePort } from '../fixtures/net.ts';

const CALLS = Number(process.env.DELIVERY_BENCH_CALLS ?? 200_000);
const REDIS_CALLS = Number(process.env.DELIVERY_BENCH_REDIS_CALLS ?? 20_000);

const fn: ResolvedFunction = {
  name: 'f',
  model: 'm',
  version: '',
  platform: 'onnxruntime_onnx',
  implicit: false,
  definition: FunctionDefinitionSchema.parse({ name: 'f', target: { model: 'm' } }),
  inputs: [{ name: 'x', tensor: 'x', datatype: 'FP32', shape: [-1] }],
  outputs: [{ name: 'y', tensor: 'y', datatype: 'FP32', shape: [-1] }],
};
const answer = { outputs: [], transfer: 'inline' as const };
const engineRun = () => Promise.resolve(answer);

/** CPU µs per call of `one`, run `n` times with `inFlight` at once, after a warm-up. */
async function cpuPerCall(n: number, inFlight: number, one: (i: number) => Promise<unknown>): Promise<number> {
  const batch = async (count: number) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        for (let i = next++; i < count; i = next++) await one(i);
      }),
    );
  };
  await batch(Math.min(n, 20_000));
  const c0 = process.cpuUsage();
  await batch(n);
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / n;
}

async function startRedis(): Promise<{ url: string; stop(): void }> {
  const port = await freePort();
  const p = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    p.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('Ready to accept connections')) resolve();
    });
    p.once('exit', (code) => reject(new Error(`redis-server exited with ${code}`)));
  });
  return { url: `redis://127.0.0.1:${port}`, stop: () => p.kill('SIGKILL') };
}

async function main(): Promise<void> {
  const rows: Array<[string, number, number]> = [];
  // ---- split ----
  const bare = await cpuPerCall(CALLS, 16, () => engineRun());
  const store = new MemoryRolloutStore();
  const manager = new RolloutManager({
    store,
    owner: 'bench',
    tickMs: 3_600_000,
    resolve: async () => fn,
    engine: {
      // The metadata both targets answer with (the same inputs and outputs, as a rollout requires).
      modelMetadata: async (name: string) => ({
        name,
        versions: ['1'],
        platform: 'onnxruntime_onnx',
        inputs: [{ name: 'x', datatype: 'FP32', shape: [-1] }],
        outputs: [{ name: 'y', datatype: 'FP32', shape: [-1] }],
      }),
      infer: async () => {
        throw new Error('no shadow in this bench');
      },
    },
    promote: async () => 'v',
  });
  const none = await cpuPerCall(CALLS, 16, (i) => manager.run(fn, `id-${i}`, { clientId: false }, [], [], engineRun));
  rows.push(['split: function without a rollout', bare, none]);
  const spec = RolloutRequestSchema.parse({
    function: 'f',
    next: { target: { model: 'm2' } },
    steps: [{ share: 50, holdMs: 3_600_000 }, { share: 100 }],
    gates: { minCalls: 1e9 },
  });
  const rec: RolloutRecord = {
    id: 'ro-bench',
    function: 'f',
    baseVersion: '1',
    spec,
    state: 'running',
    step: 0,
    createdAt: 0,
    updatedAt: 0,
    steps: [],
  };
  await store.create(rec);
  await manager.follow();
  if (!manager.following('f')) throw new Error('the bench rollout is not followed');
  const split = await cpuPerCall(CALLS, 16, (i) => manager.run(fn, `id-${i}`, { clientId: false }, [], [], engineRun));
  rows.push(['split: 50 % canary (counter)', bare, split]);
  const sticky = await cpuPerCall(CALLS, 16, (i) => manager.run(fn, `req-${i}`, { clientId: true }, [], [], engineRun));
  rows.push(['split: 50 % canary (client ids hashed)', bare, sticky]);

  // ---- plans ----
  const redis = await startRedis();
  try {
    const plans = new UsagePlans(new RedisPlanStore(redis.url, { namespace: 'bench' }), 3_600_000);
    await plans.start();
    const hdr = (k: string) => (name: string) => (name === 'x-api-key' ? k : undefined);
    const noPlans = await cpuPerCall(CALLS, 16, () => plans.admit(hdr('free-key'), undefined));
    rows.push(['plan check: no plans at all', bare, noPlans]);
    await plans.store.setPlan(keyId('gold-key'), { name: 'gold', rps: 1e6, burst: 1e7, quota: { period: 'month', limit: 1e9 } });
    await plans.refresh();
    const otherKey = await cpuPerCall(CALLS, 16, () => plans.admit(hdr('free-key'), undefined));
    rows.push(['plan check: key without a plan', bare, otherKey]);
    const viaRedis = await cpuPerCall(REDIS_CALLS, 16, () => plans.admit(hdr('gold-key'), undefined));
    rows.push(['plan check: key with a plan (Redis script)', bare, viaRedis]);
    plans.stop();
    await plans.store.close();
  } finally {
    redis.stop();
  }
  console.log('| case | CPU µs per call without | with | added (ms) |\n|---|---|---|---|');
  for (const [what, a, b] of rows) console.log(`| ${what} | ${a.toFixed(2)} | ${b.toFixed(2)} | ${((b - a) / 1000).toFixed(4)} |`);
}

await main();
