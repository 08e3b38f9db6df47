// `npm run soak -- --minutes N`: a mixed load on a real engine + gateway (two
// child processes on the bundled repository) for N minutes, sampling both
// processes' RSS (/proc: total, anonymous, file, shared memory) and V8 heap,
// external and ArrayBuffer memory (soak-probe.mjs) every 5 s. Reports each
// series' slope per minute after warm-up and over the last half of that
// window (a falling slope is memory levelling off), and every failed call.
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
//        --gateway-flags="--job-records-max=2000 ..." (extra gateway flags) --engine-flags="..." (extra engine flags)
//        --model-repository=DIR (default model_repository: a copy of it with changed configs, for an experiment)
//        --attacks[=NAME,...] (instead of the load: the HTTP/2 and HTTP/1.1 flood attacks one by one on an engine
//        whose gRPC port is the own front, soak-attacks.ts; all of them without a list)
//        --attack-window-ms=3000 (each attack sustained this long) --attack-nice=19 (the attacker's priority; 0: the engine's)
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TritonGrpcClient } from '../../client/grpc-client.ts';
import { makeJpeg, makeLargeJpeg } from '../fixtures/images.ts';
import { freePort, removeTempDir, ROOT, stopAll, stopChild, trackTempDir, waitUntil, type Child } from './processes.ts';
import { spawnProbed } from './soak-spawn.ts';
import { runAbuse } from './soak-abuse.ts';
import { runAttacks } from './soak-attacks.ts';
import { summarize, type Sample } from './soak-stats.ts';

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
  attackWindowMs: number;
  attackNice: number;
  out?: string;
  /** --gateway-flags="--a=1 --b=2": extra gateway flags (e.g. a smaller in-memory job store to reach its bound in the window). */
  gatewayFlags: string[];
  /** --engine-flags="--a=1": extra engine flags. */
  engineFlags: string[];
  /** --model-repository=DIR: the repository the engine serves (a copy of the bundled one with changed configs). */
  modelRepository: string;
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
    attackWindowMs: Number(a['attack-window-ms'] ?? 3000),
    attackNice: Number(a['attack-nice'] ?? 19),
    out: a.out,
    gatewayFlags: (a['gateway-flags'] ?? '').split(/\s+/).filter(Boolean),
    engineFlags: (a['engine-flags'] ?? '').split(/\s+/).filter(Boolean),
    modelRepository: a['model-repository'] ?? 'model_repository',
  };
}

const MB = 1024 * 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The process's resident set from /proc, in bytes: the total and its anonymous, file and shared-memory parts. */
function rssOf(pid: number): { rss: number; anon: number; file: number; shmem: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0) * 1024;
  return { rss: kb('VmRSS'), anon: kb('RssAnon'), file: kb('RssFile'), shmem: kb('RssShmem') };
}

/** One line of the probe (soak-probe.mjs), from one thread of the child. */
interface ProbeLine {
  t: number;
  threadId: number;
  heapUsed: number;
  heapTotal: number;
  heapLive?: number;
  external: number;
  arrayBuffers: number;
}

/** The child's memory summed over its threads alive: each thread's latest line, for threads heard from within 2 probe periods. */
function lastProbe(file: string): (Omit<ProbeLine, 't' | 'threadId' | 'heapLive'> & { heapLive: number; threads: number }) | undefined {
  let lines: ProbeLine[];
  try {
    lines = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as ProbeLine);
  } catch {
    return undefined;
  }
  if (!lines.length) return undefined;
  const latest = new Map<number, ProbeLine>();
  for (const l of lines) latest.set(l.threadId ?? 0, l);
  const newest = lines[lines.length - 1]!.t;
  const alive = [...latest.values()].filter((l) => newest - l.t <= 10_000);
  const sum = (f: (l: ProbeLine) => number) => alive.reduce((a, l) => a + f(l), 0);
  return {
    threads: alive.length,
    heapUsed: sum((l) => l.heapUsed),
    heapTotal: sum((l) => l.heapTotal),
    // A thread with no major GC yet counts its heapUsed.
    heapLive: sum((l) => l.heapLive ?? l.heapUsed),
    external: sum((l) => l.external),
    arrayBuffers: sum((l) => l.arrayBuffers),
  };
}

/** Per thread alive at the last line: its heap after major GCs (MB) after warm-up, summarized. */
function heapLiveByThread(file: string, warmEnd: number): Record<string, ReturnType<typeof summarize>> {
  const byThread = new Map<number, Sample[]>();
  let newest = 0;
  for (const l of readFileSync(file, 'utf8').trim().split('\n')) {
    const p = JSON.parse(l) as ProbeLine;
    newest = Math.max(newest, p.t);
    const s = byThread.get(p.threadId ?? 0) ?? [];
    s.push({ t: p.t, value: (p.heapLive ?? p.heapUsed) / MB });
    byThread.set(p.threadId ?? 0, s);
  }
  const out: Record<string, ReturnType<typeof summarize>> = {};
  for (const [id, s] of byThread) if (newest - s[s.length - 1]!.t <= 10_000) out[id] = summarize(s, warmEnd);
  return out;
}

/**
 * Every series sampled from one child (MB, but `threads`): `heap` is heapUsed as sampled (garbage included), `heapLive`
 * after each thread's latest major GC; heaps, external and ArrayBuffer memory are summed over the threads alive.
 */
const SERIES = ['rss', 'rssAnon', 'rssShmem', 'rssFile', 'heap', 'heapTotal', 'heapLive', 'external', 'arrayBuffers', 'threads'] as const;
type Series = Record<(typeof SERIES)[number], Sample[]>;
const newSeries = (): Series => Object.fromEntries(SERIES.map((k) => [k, []])) as unknown as Series;

async function main(): Promise<void> {
  const args = parse(process.argv.slice(2));
  if (args.attacks)
    return runAttacks(args.attacks, { windowMs: args.attackWindowMs, nice: args.attackNice, engineFlags: args.engineFlags }, args.out);
  const dir = trackTempDir(mkdtempSync(path.join(os.tmpdir(), 'soak-')));
  const prefix = `soak${process.pid}`;
  const [grpcPort, httpPort, metricsPort, gwPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const engine = spawnProbed(
    'engine',
    'engine/main.ts',
    [
      `--model-repository=${args.modelRepository}`,
      `--grpc-port=${grpcPort}`,
      `--http-port=${httpPort}`,
      `--metrics-port=${metricsPort}`,
      '--http-address=127.0.0.1',
      '--allow-client-shm=true',
      `--shm-key-prefix=/${prefix}_`,
      '--model-control-mode=explicit',
      '--load-model=*',
      ...args.engineFlags,
    ],
    path.join(dir, 'engine.jsonl'),
  );
  const client = new TritonGrpcClient(`127.0.0.1:${grpcPort}`);
  await waitUntil(engine, async () => (await client.serverReady({ timeoutMs: 1000 })).ready, 120_000);
  const gateway = spawnProbed(
    'gateway',
    'gateway/main.ts',
    [
      `--port=${gwPort}`,
      '--host=127.0.0.1',
      `--engine=127.0.0.1:${grpcPort}`,
      '--functions=functions',
      `--prefix=${prefix}`,
      ...args.gatewayFlags,
    ],
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

  // A child that dies mid-soak ends it at once, with the other child stopped and its shm regions removed
  // (before, the next sample threw from a timer and left the gateway running).
  let finishing = false;
  const children = [
    ['engine', engine],
    ['gateway', gateway],
  ] as const;
  for (const [who, child] of children) {
    child.proc.once('exit', (code, signal) => {
      if (finishing) return;
      finishing = true;
      process.stderr.write(`soak failed: the ${who} exited mid-soak (${signal ?? `code ${code}`}); stopping the rest\n`);
      void stopAll().finally(() => process.exit(2));
    });
  }
  const t0 = Date.now();
  const end = t0 + args.minutes * 60_000;
  const warmEnd = t0 + args.warmupMinutes * 60_000;
  const samples = { engine: newSeries(), gateway: newSeries() };
  const probes = { engine: path.join(dir, 'engine.jsonl'), gateway: path.join(dir, 'gateway.jsonl') };
  const sample = () => {
    const t = Date.now();
    for (const [who, child] of children) {
      const s = samples[who];
      let r: ReturnType<typeof rssOf>;
      try {
        r = rssOf(child.proc.pid!);
      } catch {
        continue; // the process is gone: its 'exit' handler ends the soak
      }
      s.rss.push({ t, value: r.rss / MB });
      s.rssAnon.push({ t, value: r.anon / MB });
      s.rssShmem.push({ t, value: r.shmem / MB });
      s.rssFile.push({ t, value: r.file / MB });
      const p = lastProbe(probes[who]);
      if (!p) continue;
      s.heap.push({ t, value: p.heapUsed / MB });
      s.heapTotal.push({ t, value: p.heapTotal / MB });
      s.heapLive.push({ t, value: p.heapLive / MB });
      s.threads.push({ t, value: p.threads });
      s.external.push({ t, value: p.external / MB });
      s.arrayBuffers.push({ t, value: p.arrayBuffers / MB });
    }
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
      `soak ${((Date.now() - t0) / 60_000).toFixed(1)} min: engine rss ${last(samples.engine.rss)} MB (anon ${last(samples.engine.rssAnon)}, heap live ${last(samples.engine.heapLive)}), gateway rss ${last(samples.gateway.rss)} MB (anon ${last(samples.gateway.rssAnon)}, heap live ${last(samples.gateway.heapLive)}), calls ${Object.values(counts).reduce((a, b) => a + b, 0)}, errors ${errorCount}\n`,
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

  // Per process and series: first value after warm-up, last value, slope over the window after warm-up and over its last half.
  const report = (s: Series) => Object.fromEntries(SERIES.map((k) => [k, summarize(s[k], warmEnd)]));
  const memory = { engine: report(samples.engine), gateway: report(samples.gateway) };
  // Which thread's heap moves: each engine thread alive at the end (0: the main thread), its heap after major GCs.
  const engineThreads = heapLiveByThread(probes.engine, warmEnd);
  // The figures earlier reports carried, kept under their names.
  const legacy = (m: (typeof memory)['engine']) => ({
    rssMbAfterWarmup: m.rss!.afterWarmup,
    rssMbEnd: m.rss!.end,
    rssSlopeMbPerMin: m.rss!.slopePerMin,
    rssLastHalfSlopeMbPerMin: m.rss!.lastHalfSlopePerMin,
    heapSlopeMbPerMin: m.heap!.slopePerMin,
    heapMbEnd: m.heap!.end,
    heapLiveSlopeMbPerMin: m.heapLive!.slopePerMin,
    heapLiveLastHalfSlopeMbPerMin: m.heapLive!.lastHalfSlopePerMin,
  });
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
    engine: legacy(memory.engine),
    gateway: legacy(memory.gateway),
    memory,
    engineThreads,
    samples,
  };
  const { samples: _omit, ...summary } = result;
  process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  const out = args.out ?? path.join(ROOT, 'test/bench/results', `soak-${result.date.replace(/[:.]/g, '-')}.json`);
  mkdirSync(path.dirname(out), { recursive: true });
  writeFileSync(out, JSON.stringify(result));
  process.stderr.write(`soak: result written to ${path.relative(ROOT, out)}\n`);
  client.close();
  finishing = true;
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
