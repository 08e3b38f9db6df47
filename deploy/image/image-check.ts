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
//  2. The chart's pod: the engine and gateway containers with the command and
//     args `helm template` renders, sharing one /dev/shm: the gateway ready
//     and a function call through it; SIGTERM to the gateway, then to the
//     engine, each exiting 0.
//
// Prints the timings and the image size, writes them to last-run.json in
// IMAGE_WORK (buildah.ts), exits 1 naming the first failure.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { helmTemplate } from '../tools/helm-render.ts';
import { buildah, diskBytes, IMAGE_WORK, log } from './buildah.ts';
import { containerPids, netnsPids, removeContainer, startContainer, stopContainer, uidOf, type Running } from './container-run.ts';
import { buildImage, chooseBases } from './image-build.ts';

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

/** Runs probe.ts inside the namespace; returns its JSON line. */
function probe(since: number, ports: { http: number; grpc: number; metrics: number; gateway?: number }): Record<string, unknown> {
  const args = [`--since=${since}`, `--http=${ports.http}`, `--grpc=${ports.grpc}`, `--metrics=${ports.metrics}`, `--models=${bundledModels.join(',')}`];
  if (ports.gateway) args.push(`--gateway=${ports.gateway}`, `--api-key=${API_KEY}`);
  const r = spawnSync('ip', ['netns', 'exec', NS, process.execPath, '--import', 'tsx', path.join(ROOT, 'deploy/image/probe.ts'), ...args], { encoding: 'utf8', cwd: ROOT });
  if (r.status !== 0) throw new Error(`${r.stderr.trim() || `probe exited ${r.status}`}`);
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as Record<string, unknown>;
}

/** Every process of the container runs as the image's user. */
function checkUids(r: Running, uid: number): void {
  const pids = containerPids(NS, r);
  const wrong = pids.filter((p) => uidOf(p) !== uid);
  if (!pids.length || wrong.length) throw new Error(`${r.spec.name}: processes ${wrong.join(', ')} do not run as uid ${uid}`);
}

async function stopAndCheck(r: Running): Promise<number> {
  const { code, seconds } = await stopContainer(NS, r);
  if (code !== 0) throw new Error(`${r.spec.name}: exit ${code === null ? '(none: killed after 60 s)' : code} on SIGTERM, expected 0; its output: ${r.logFile}`);
  log(`${r.spec.name}: exit 0 ${seconds.toFixed(1)} s after SIGTERM`);
  return seconds;
}

async function kserveRun(modelDir: string): Promise<void> {
  const runtime = parse(fs.readFileSync(path.join(ROOT, 'deploy/kserve/cluster-serving-runtime.yaml'), 'utf8'));
  const args = runtime.spec.containers[0].args as string[];
  const flag = (name: string) => Number(args.find((a) => a.startsWith(`--${name}=`))?.split('=')[1]);
  log(`kserve: ${args.join(' ')}`);
  const r = startContainer(NS, { name: `${NS}-kserve`, image: TAG, args, volumes: { [modelDir]: '/mnt/models' } }, path.join(IMAGE_WORK, 'kserve.log'));
  running.push(r);
  const p = probe(r.startedAt, { http: flag('http-port'), grpc: flag('grpc-port'), metrics: 8002 });
  checkUids(r, 10001);
  log(`kserve: ready in ${p.engine_ready_s} s, ${p.models_ready} models, inference, metrics and gRPC answer; uid 10001`);
  summary.kserve = { ...p, sigterm_exit_s: await stopAndCheck(r) };
}

async function podRun(modelDir: string): Promise<void> {
  const deployment = helmTemplate(3, path.join(ROOT, 'deploy/helm/tritonish'), { release: 'tritonish' }).find((o) => o.object.kind === 'Deployment' && o.object.metadata.name === 'tritonish')!;
  const pod = deployment.object.spec.template.spec;
  const shm = fs.mkdtempSync(`/dev/shm/${NS}-`);
  fs.chmodSync(shm, 0o1777);
  const mounts = (c: Record<string, any>): Record<string, string> => {
    const out: Record<string, string> = {};
    for (const m of c.volumeMounts ?? []) {
      if (m.name === 'shm') out[shm] = '/dev/shm:rw';
      if (m.name === 'models') out[modelDir] = m.mountPath; // the init container's copy of the image's repository
    }
    return out;
  };
  const port = (c: Record<string, any>, name: string) => Number(c.ports.find((p: Record<string, any>) => p.name === name).containerPort);
  const [engineC, gatewayC] = pod.containers as Array<Record<string, any>>;
  // No Redis here: the gateway keeps leases and jobs in memory; the recommender function wants an API key.
  const env = { REDIS_URL: '', RECOMMENDER_API_KEYS: API_KEY };
  log(`pod: engine ${[...engineC!.command, ...engineC!.args].join(' ')}`);
  const engine = startContainer(NS, { name: `${NS}-engine`, image: TAG, args: [...engineC!.command, ...engineC!.args], volumes: mounts(engineC!) }, path.join(IMAGE_WORK, 'engine.log'));
  running.push(engine);
  log(`pod: gateway ${[...gatewayC!.command, ...gatewayC!.args].join(' ')}`);
  const gateway = startContainer(NS, { name: `${NS}-gateway`, image: TAG, args: [...gatewayC!.command, ...gatewayC!.args], env, volumes: mounts(gatewayC!) }, path.join(IMAGE_WORK, 'gateway.log'));
  running.push(gateway);
  try {
    const p = probe(engine.startedAt, { http: port(engineC!, 'engine-http'), grpc: port(engineC!, 'engine-grpc'), metrics: port(engineC!, 'metrics'), gateway: port(gatewayC!, 'http') });
    checkUids(engine, 10001);
    checkUids(gateway, 10001);
    log(`pod: engine ready in ${p.engine_ready_s} s, gateway in ${p.gateway_ready_s} s; a function call through the gateway answers`);
    summary.pod = { ...p, gateway_sigterm_exit_s: await stopAndCheck(gateway), engine_sigterm_exit_s: await stopAndCheck(engine) };
  } finally {
    fs.rmSync(shm, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error('image:check needs root (buildah with the vfs driver, network namespaces)');
  for (const tool of ['buildah', 'ip']) if (spawnSync('which', [tool]).status !== 0) throw new Error(`image:check needs '${tool}' (apt-get install -y buildah iproute2 mmdebstrap)`);
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
    log(`image: ${(Number(summary.image_bytes) / 2 ** 20).toFixed(0)} MiB unpacked, of which /app ${(Number(summary.app_bytes) / 2 ** 20).toFixed(0)} MiB`);
    await kserveRun(modelDir);
    await podRun(modelDir);
  } finally {
    for (const pid of netnsPids(NS)) process.kill(pid, 'SIGKILL'); // only this check's processes live in its namespace
    await Promise.all(running.map((r) => r.exited));
    for (const r of running) removeContainer(r);
    spawnSync('ip', ['netns', 'del', NS]);
  }
  summary.total_s = (Date.now() - started) / 1000;
  fs.writeFileSync(path.join(IMAGE_WORK, 'last-run.json'), `${JSON.stringify(summary, null, 2)}\n`);
  log(`image check passed in ${Number(summary.total_s).toFixed(0)} s; summary in ${path.join(IMAGE_WORK, 'last-run.json')}`);
}

main().catch((e) => {
  log(`image check FAILED: ${(e as Error).message}`);
  process.exit(1);
});
