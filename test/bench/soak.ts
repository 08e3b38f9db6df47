// `npm run soak -- --minutes N`: a mixed load on a real engine + gateway (two
// child processes on the bundled repository) for N minutes, sampling both
// processes' RSS (/proc) and V8 heap (soak-probe.mjs) every 5 s. Reports the
// slope per minute after warm-up and every failed call.
//
// Load (round-robin over `--concurrency` loops, `--pause-ms` between calls so
// a shared machine keeps some CPU): ensembles inline, a multi-megabyte JPEG
// staged through shm, async jobs (202, then polled to the end), sync JSON
// calls; and a reload of product_recommender_model every minute.
//
// Flags: --minutes=N (default 5) --warmup-minutes=W (default max(1, N/5))
//        --concurrency=3 --pause-ms=20 --reload-minutes=1 (0: no reloads)
//        --kinds=ensemble,moderated,staged,recommender,async (a subset) --out=FILE (JSON result)
//        --abuse=pipeline-flood,slow-reader (abusive clients beside the load, soak-abuse.ts; a lost call is an error)
//        --attacks[=NAME,...] (instead of the load: the HTTP/2 and HTTP/1.1 flood attacks one by one on an engine
//        whose gRPC port is the own front, soak-attacks.ts; all of them without a list)
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TritonGrpcClient } from '../../client/grpc-client.ts';
import { makeJpeg, makeLargeJpeg } from '../fixtures/images.ts';
import { freePort, removeTempDir, ROOT, stopAll, stopChild, trackTempDir, waitUntil, type Child } from './processes.ts';
import { spawnProbed } from './soak-spawn.ts';
import { runAbuse } from './soak-abuse.ts';
import { runAttacks } from './soak-attacks.ts';
import { afterWarmup, slopePerMinute, type Sample } from './soak-stats.ts';

interface Args {
  minutes: number;
  warmupMinutes: number;
  concurrency: number;
  pauseMs: number;
  reloadMinutes: number;
  kinds?: string[];
  abuse: string[];
  /** --attacks: the attack suite instead of the soak (an empty list: every attack). */
  attacks?: string[];
  out?: string;
}

function parse(argv: string[]): Args {
  const a: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(argv[i]!);
    if (!m) throw new Error(`unexpected argument '${argv[i]}'`);
    a[m[1]!] = m[2] ?? (m[1] === 'attacks' ? '' : (argv[++i] ?? ''));
  }
  const minutes = Number(a.minutes ?? 5);
  return {
    minutes,
    warmupMinutes: Number(a['warmup-minutes'] ?? Math.max(1, minutes / 5)),
    concurrency: Number(a.concurrency ?? 3),
    pauseMs: Number(a['pause-ms'] ?? 20),
    reloadMinutes: Number(a['reload-minutes'] ?? 1),
    kinds: a.kinds ? a.kinds.split(',') : undefined,
    abuse: a.abuse ? a.abuse.split(',') : [],
    attacks: a.attacks === undefined ? undefined : a.attacks.split(',').filter(Boolean),
    out: a.out,
  };
}

const MB = 1024 * 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}

function lastProbe(file: string): { heapUsed: number; external: number } | undefined {
  try {
    const lines = readFileSync(file, 'utf8').trim().split('\n');
    return JSON.parse(lines[lines.length - 1]!) as { heapUsed: number; external: number };
  } catch {
    return undefined;
  }
}

async function main(): Promise<void> {
  const args = parse(process.argv.slice(2));
  if (args.attacks) return runAttacks(args.attacks, args.out);
  const dir = trackTempDir(mkdtempSync(path.join(os.tmpdir(), 'soak-')));
  const prefix = `soak${process.pid}`;
  const [grpcPort, httpPort, metricsPort, gwPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const engine = spawnProbed(
    'engine',
    'engine/main.ts',
    [
      '--model-repository=model_repository',
      `--grpc-port=${grpcPort}`,
      `--http-port=${httpPort}`,
      `--metrics-port=${metricsPort}`,
      '--http-address=127.0.0.1',
      '--allow-client-shm=true',
      `--shm-key-prefix=/${prefix}_`,
      '--model-control-mode=explicit',
      '--load-model=*',
    ],
    path.join(dir, 'engine.jsonl'),
  );
  const client = new TritonGrpcClient(`127.0.0.1:${grpcPort}`);
  await waitUntil(engine, async () => (await client.serverReady({ timeoutMs: 1000 })).ready, 120_000);
  const gateway = spawnProbed(
    'gateway',
    'gateway/main.ts',
    [`--port=${gwPort}`, '--host=127.0.0.1', `--engine=127.0.0.1:${grpcPort}`, '--functions=functions', `--prefix=${prefix}`],
    path.join(dir, 'gateway.jsonl'),
    { RECOMMENDER_API_KEYS: 'soak-key', REDIS_URL: '' },
  );
  const base = `http://127.0.0.1:${gwPort}`;
  await waitUntil(gateway, async () => (await fetch(`${base}/readyz`)).status === 200, 60_000);

  const small = await makeJpeg(160, 120, 3);
  const large = await makeLargeJpeg(2 * MB);
  const features = JSON.stringify({ inputs: { user_features: [Array.from({ length: 64 }, (_, i) => (i % 7) / 7)] } });
  const jsonHeaders = { 'Content-Type': 'application/json', 'X-API-Key': 'soak-key' };
  const counts: Record<string, number> = {};
  const errors: string[] = [];
  let errorCount = 0;
  const fail = (what: string) => {
    errorCount++;
    if (errors.length < 20) errors.push(`${new Date().toISOString()} ${what}`);
  };
  const expectOk = async (kind: string, r: Response, want = 200) => {
    const text = await r.text();
    if (r.status !== want) fail(`${kind}: HTTP ${r.status} ${text.slice(0, 200)}`);
    else counts[kind] = (counts[kind] ?? 0) + 1;
    return text;
  };
  const kinds: Array<[string, () => Promise<void>]> = [
    [
      'ensemble',
      async () =>
        void (await expectOk(
          'ensemble',
          await fetch(`${base}/fn/search_pipeline_ensemble`, { method: 'POST', body: small, headers: { 'Content-Type': 'image/jpeg' } }),
        )),
    ],
    [
      'moderated',
      async () =>
        void (await expectOk(
          'moderated',
          await fetch(`${base}/fn/moderated_search_ensemble`, { method: 'POST', body: small, headers: { 'Content-Type': 'image/jpeg' } }),
        )),
    ],
    [
      'staged',
      async () => {
        const r = await fetch(`${base}/fn/image_search`, { method: 'POST', body: large, headers: { 'Content-Type': 'image/jpeg' } });
        if (r.headers.get('x-payload-transfer') !== 'shm' && r.status === 200) fail('staged: large body was not staged');
        await expectOk('staged', r);
      },
    ],
    [
      'recommender',
      async () =>
        void (await expectOk(
          'recommender',
          await fetch(`${base}/fn/product_recommender`, { method: 'POST', body: features, headers: jsonHeaders }),
        )),
    ],
    [
      'async',
      async () => {
        const r = await fetch(`${base}/fn/product_recommender`, {
          method: 'POST',
          body: features,
          headers: { ...jsonHeaders, Prefer: 'respond-async' },
        });
        const text = await expectOk('async-accept', r, 202);
        if (r.status !== 202) return;
        const { id } = JSON.parse(text) as { id: string };
        for (let i = 0; i < 600; i++) {
          // The job of a function with an API key is read with the key its call was made with.
          const j = (await (await fetch(`${base}/jobs/${id}`, { headers: { 'X-API-Key': jsonHeaders['X-API-Key'] } })).json()) as {
            status: string;
            error?: unknown;
          };
          if (j.status === 'succeeded') return void (counts.async = (counts.async ?? 0) + 1);
          if (j.status === 'failed') return fail(`async: job ${id} failed: ${JSON.stringify(j.error)}`);
          await sleep(20);
        }
        fail(`async: job ${id} did not finish in 12 s`);
      },
    ],
  ];

  const t0 = Date.now();
  const end = t0 + args.minutes * 60_000;
  const warmEnd = t0 + args.warmupMinutes * 60_000;
  const samples = { engineRss: [] as Sample[], gatewayRss: [] as Sample[], engineHeap: [] as Sample[], gatewayHeap: [] as Sample[] };
  const sample = () => {
    const t = Date.now();
    samples.engineRss.push({ t, value: rssOf(engine.proc.pid!) / MB });
    samples.gatewayRss.push({ t, value: rssOf(gateway.proc.pid!) / MB });
    const eh = lastProbe(path.join(dir, 'engine.jsonl'));
    const gh = lastProbe(path.join(dir, 'gateway.jsonl'));
    if (eh) samples.engineHeap.push({ t, value: eh.heapUsed / MB });
    if (gh) samples.gatewayHeap.push({ t, value: gh.heapUsed / MB });
  };
  sample();
  const sampler = setInterval(sample, 5000);
  let reloads = 0;
  const reloader = setInterval(() => {
    if (args.reloadMinutes <= 0) return;
    client.repositoryModelLoad('product_recommender_model').then(
      () => reloads++,
      (e: Error) => fail(`reload: ${e.message}`),
    );
  }, Math.max(1, args.reloadMinutes) * 60_000);
  const active = args.kinds ? kinds.filter(([k]) => args.kinds!.includes(k)) : kinds;
  if (!active.length) throw new Error(`--kinds: none of ${args.kinds} is one of ${kinds.map(([k]) => k).join(', ')}`);
  const progress = setInterval(() => {
    const last = (s: Sample[]) => s[s.length - 1]?.value.toFixed(1);
    process.stderr.write(
      `soak ${((Date.now() - t0) / 60_000).toFixed(1)} min: engine rss ${last(samples.engineRss)} MB, gateway rss ${last(samples.gatewayRss)} MB, calls ${Object.values(counts).reduce((a, b) => a + b, 0)}, errors ${errorCount}\n`,
    );
  }, 60_000);

  const abuse = runAbuse(args.abuse, gwPort, features, 'soak-key', end);
  await Promise.all(
    Array.from({ length: args.concurrency }, async (_, w) => {
      for (let i = w; Date.now() < end; i++) {
        const [kind, run] = active[i % active.length]!;
        try {
          await run();
        } catch (e) {
          fail(`${kind}: ${(e as Error).message}`);
        }
        await sleep(args.pauseMs);
      }
    }),
  );
  const abused = await abuse;
  for (const [k, c] of Object.entries(abused))
    if (c.lost || c.other) fail(`${k}: ${c.lost} calls without a reply, ${c.other} neither 200 nor 503`);
  clearInterval(sampler);
  clearInterval(reloader);
  clearInterval(progress);
  sample();

  const slope = (s: Sample[]) => Number(slopePerMinute(afterWarmup(s, warmEnd)).toFixed(3));
  const first = (s: Sample[]) => Number((afterWarmup(s, warmEnd)[0]?.value ?? 0).toFixed(1));
  const lastV = (s: Sample[]) => Number((s[s.length - 1]?.value ?? 0).toFixed(1));
  const result = {
    date: new Date().toISOString(),
    machine: `${os.cpus().length} x ${os.cpus()[0]?.model ?? 'cpu'}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, Node ${process.version}`,
    minutes: args.minutes,
    warmupMinutes: args.warmupMinutes,
    concurrency: args.concurrency,
    pauseMs: args.pauseMs,
    reloadMinutes: args.reloadMinutes,
    kinds: active.map(([k]) => k),
    calls: counts,
    abuse: abused,
    reloads,
    errors: errorCount,
    firstErrors: errors,
    engine: {
      rssMbAfterWarmup: first(samples.engineRss),
      rssMbEnd: lastV(samples.engineRss),
      rssSlopeMbPerMin: slope(samples.engineRss),
      heapSlopeMbPerMin: slope(samples.engineHeap),
      heapMbEnd: lastV(samples.engineHeap),
    },
    gateway: {
      rssMbAfterWarmup: first(samples.gatewayRss),
      rssMbEnd: lastV(samples.gatewayRss),
      rssSlopeMbPerMin: slope(samples.gatewayRss),
      heapSlopeMbPerMin: slope(samples.gatewayHeap),
      heapMbEnd: lastV(samples.gatewayHeap),
    },
    samples,
  };
  const { samples: _omit, ...summary } = result;
  process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  const out = args.out ?? path.join(ROOT, 'test/bench/results', `soak-${result.date.replace(/[:.]/g, '-')}.json`);
  mkdirSync(path.dirname(out), { recursive: true });
  writeFileSync(out, JSON.stringify(result));
  process.stderr.write(`soak: result written to ${path.relative(ROOT, out)}\n`);
  client.close();
  await stopChild(gateway);
  await stopChild(engine as Child);
  removeTempDir(dir);
  process.exitCode = errorCount ? 1 : 0;
}

main().catch(async (e) => {
  process.stderr.write(`soak failed: ${(e as Error).stack ?? e}\n`);
  await stopAll();
  process.exit(2);
});
