// `npm run image:check`: builds deploy/Dockerfile daemonless with buildah and
// runs the image as Kubernetes would, each run in a network namespace of its
// own (needs root, buildah, mmdebstrap where the registry is out of reach):
//
//  1. KServe: the image's entry (tini) with the ClusterServingRuntime's args
//     (`tritonserver --model-store=/mnt/models --grpc-port=9000 ...`, read
//     from deploy/kserve/cluster-serving-runtime.yaml), the bundled models
//     mounted at /mnt/models as KServe's storage initializer puts them: every
//     model ready, an inference, metrics, gRPC, the processes under uid 10001,
//     exit 0 on SIGTERM.
//  2. The chart's default install (pod-check.ts): every container of the pod
//     the real Helm renders, init copy first, run from the image's root by
//     the pod simulation with the manifest's users, volumes, environment and
//     command lines: ready, tini as PID 1, a function call, exit 0 on SIGTERM.
//
// Deadlines scale with the host: the probe's budget and the stop's grace
// are multiplied by the load average per core (at least 1) while waiting,
// and a container that exits ends the wait at once with its output.
// Prints the timings and the image size, writes them to last-run.json in
// IMAGE_WORK (buildah.ts), exits 1 naming the first failure.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import os from 'node:os';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { loadFactor } from '../tools/pod/pod-run.ts';
import { buildah, diskBytes, IMAGE_WORK, log } from './buildah.ts';
import { containerPids, netnsPids, removeContainer, startContainer, stopContainer, uidOf, type Running } from './container-run.ts';
import { buildImage, chooseBases } from './image-build.ts';
import { podCheck } from './pod-check.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const DOCKERFILE = path.join(ROOT, 'deploy/Dockerfile');
const TAG = 'localhost/tritonish:check';
const NS = `tnimg-${process.pid}`;
const API_KEY = 'image-check-key';
const started = Date.now();
const summary: Record<string, unknown> = { date: new Date().toISOString() };
const running: Running[] = [];

const bundledModels = fs
  .readdirSync(path.join(ROOT, 'model_repository'))
  .filter((m) => fs.existsSync(path.join(ROOT, 'model_repository', m, 'config.pbtxt')))
  .sort();

/**
 * Runs probe.ts inside the namespace (its deadline: 300 s, KServe's and the
 * chart's startup budget, times the host's load); resolves to its JSON line,
 * or fails as soon as the container `r` exits, with the container's output.
 */
async function probe(r: Running, ports: { http: number; grpc: number; metrics: number }): Promise<Record<string, unknown>> {
  const args = [
    `--since=${r.startedAt}`,
    `--http=${ports.http}`,
    `--grpc=${ports.grpc}`,
    `--metrics=${ports.metrics}`,
    `--models=${bundledModels.join(',')}`,
    '--budget-s=300',
  ];
  const p = spawn('ip', ['netns', 'exec', NS, process.execPath, '--import', 'tsx', path.join(ROOT, 'deploy/image/probe.ts'), ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  p.stdout.on('data', (d: Buffer) => (out += d.toString()));
  p.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const probed = new Promise<number | null>((res) => p.on('exit', (code) => res(code)));
  const first = await Promise.race([probed.then((code) => ({ code })), r.exited.then((code) => ({ container: code }))]);
  if ('container' in first) {
    p.kill('SIGKILL');
    throw new Error(
      `${r.spec.name} exited ${first.container} before it was ready; its output: ${r.logFile}\n${fs.readFileSync(r.logFile, 'utf8').trimEnd().split('\n').slice(-15).join('\n')}`,
    );
  }
  if (first.code !== 0) throw new Error(err.trim() || `probe exited ${first.code}`);
  return JSON.parse(out.trim().split('\n').pop()!) as Record<string, unknown>;
}

/** Every process of the container runs as the image's user. */
function checkUids(r: Running, uid: number): void {
  const pids = containerPids(NS, r);
  const wrong = pids.filter((p) => uidOf(p) !== uid);
  if (!pids.length || wrong.length) throw new Error(`${r.spec.name}: processes ${wrong.join(', ')} do not run as uid ${uid}`);
}

async function stopAndCheck(r: Running): Promise<number> {
  // The chart's grace period (60 s), scaled by the load, as every deadline here.
  const timeoutMs = 60_000 * loadFactor();
  const { code, seconds } = await stopContainer(NS, r, timeoutMs);
  if (code !== 0)
    throw new Error(
      `${r.spec.name}: exit ${code === null ? `(none: killed after ${(timeoutMs / 1000).toFixed(0)} s)` : code} on SIGTERM, expected 0; its output: ${r.logFile}`,
    );
  log(`${r.spec.name}: exit 0 ${seconds.toFixed(1)} s after SIGTERM`);
  return seconds;
}

async function kserveRun(modelDir: string): Promise<void> {
  const runtime = parse(fs.readFileSync(path.join(ROOT, 'deploy/kserve/cluster-serving-runtime.yaml'), 'utf8'));
  const args = runtime.spec.containers[0].args as string[];
  const flag = (name: string) => Number(args.find((a) => a.startsWith(`--${name}=`))?.split('=')[1]);
  log(`kserve: ${args.join(' ')}`);
  const r = startContainer(
    NS,
    { name: `${NS}-kserve`, image: TAG, args, volumes: { [modelDir]: '/mnt/models' } },
    path.join(IMAGE_WORK, 'kserve.log'),
  );
  running.push(r);
  const p = await probe(r, { http: flag('http-port'), grpc: flag('grpc-port'), metrics: 8002 });
  checkUids(r, 10001);
  log(`kserve: ready in ${p.engine_ready_s} s, ${p.models_ready} models, inference, metrics and gRPC answer; uid 10001`);
  summary.kserve = { ...p, sigterm_exit_s: await stopAndCheck(r) };
}

async function main(): Promise<void> {
  summary.load_average_1m_at_start = os.loadavg()[0];
  if (process.getuid?.() !== 0) throw new Error('image:check needs root (buildah with the vfs driver, network namespaces)');
  for (const tool of ['buildah', 'ip'])
    if (spawnSync('which', [tool]).status !== 0)
      throw new Error(`image:check needs '${tool}' (apt-get install -y buildah iproute2 mmdebstrap)`);
  fs.mkdirSync(IMAGE_WORK, { recursive: true });
  // What an earlier run left in this check's own storage: containers of a run that died, the last run's image.
  buildah(['rm', '--all']);
  buildah(['rmi', '--prune']);
  const bases = chooseBases(DOCKERFILE, { rebuildBase: process.argv.includes('--rebuild-base') });
  summary.base = bases;
  summary.build_s = buildImage(ROOT, DOCKERFILE, bases, TAG);
  log(`image: ${TAG} built in ${Number(summary.build_s).toFixed(0)} s`);
  execFileSync('ip', ['netns', 'add', NS]);
  execFileSync('ip', ['-n', NS, 'link', 'set', 'lo', 'up']);
  try {
    // The models as the storage initializer / init container would deliver them: the image's own repository.
    const first = startContainer(NS, { name: `${NS}-models`, image: TAG, args: ['true'] }, path.join(IMAGE_WORK, 'models.log'));
    running.push(first);
    await first.exited;
    const modelDir = path.join(first.rootfs, 'app/model_repository');
    summary.image_bytes = diskBytes(first.rootfs);
    summary.app_bytes = diskBytes(path.join(first.rootfs, 'app'));
    log(
      `image: ${(Number(summary.image_bytes) / 2 ** 20).toFixed(0)} MiB unpacked, of which /app ${(Number(summary.app_bytes) / 2 ** 20).toFixed(0)} MiB`,
    );
    await kserveRun(modelDir);
    summary.pod = await podCheck(ROOT, TAG, API_KEY);
  } finally {
    for (const pid of netnsPids(NS)) process.kill(pid, 'SIGKILL'); // only this check's processes live in its namespace
    await Promise.all(running.map((r) => r.exited));
    for (const r of running) removeContainer(r);
    spawnSync('ip', ['netns', 'del', NS]);
  }
  summary.total_s = (Date.now() - started) / 1000;
  summary.load_average_1m_at_end = os.loadavg()[0];
  summary.cores = os.availableParallelism();
  fs.writeFileSync(path.join(IMAGE_WORK, 'last-run.json'), `${JSON.stringify(summary, null, 2)}\n`);
  log(`image check passed in ${Number(summary.total_s).toFixed(0)} s; summary in ${path.join(IMAGE_WORK, 'last-run.json')}`);
}

main().catch((e) => {
  log(`image check FAILED: ${(e as Error).message}`);
  process.exit(1);
});
