// The chart's default install run from the built image (image:check, step 4):
// the real Helm renders the chart, then the pod simulation (deploy/tools/pod)
// runs every container of the pod from the image's unpacked root as the
// kubelet would (init copy into a kubelet-made emptyDir, then engine and
// gateway under the image's tini, users, volumes and environment from the
// manifest), beside the dev Redis pod (Debian's redis-server as the
// redis:7.0 stand-in). Checks: the init container exits 0, both containers
// answer their probes, tini is PID 1 of each and every process runs as uid
// 10001, a function call through the gateway answers, SIGTERM ends each
// container with exit 0. The containers share one unpacked root, each
// mounting it read-only as readOnlyRootFilesystem asks.
import fs from 'node:fs';
import path from 'node:path';
import { helmTemplate } from '../tools/helm-render.ts';
import { childPids, initPid } from '../tools/pod/container-sandbox.ts';
import { loadFactor, PodSimulation } from '../tools/pod/pod-run.ts';
import { builtApp, simImages } from '../tools/pod/sim-images.ts';
import { buildah, IMAGE_WORK, imageConfig, log } from './buildah.ts';

type Obj = Record<string, any>;

const status = (pid: number, field: string): string =>
  new RegExp(`^${field}:\\s+(.*)$`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]?.trim() ?? '';

/** Every process of a container (its PID 1 and descendants) as uid `uid`, PID 1 being tini. */
function checkProcesses(name: string, pid1: number, uid: number): number {
  const all: number[] = [];
  const walk = (p: number) => {
    all.push(p);
    for (const c of childPids(p)) walk(c);
  };
  walk(pid1);
  if (fs.readFileSync(`/proc/${pid1}/comm`, 'utf8').trim() !== 'tini' || status(pid1, 'NSpid').split(/\s+/).pop() !== '1')
    throw new Error(`${name}: PID 1 is not tini`);
  const wrong = all.filter((p) => Number(status(p, 'Uid').split(/\s+/)[0]) !== uid);
  if (wrong.length) throw new Error(`${name}: processes ${wrong.join(', ')} do not run as uid ${uid}`);
  return all.length;
}

/** Runs the check on image `tag`; returns the summary's pod section. */
export async function podCheck(root: string, tag: string, apiKey: string): Promise<Record<string, unknown>> {
  const objects = helmTemplate(3, path.join(root, 'deploy/helm/tritonish'), {
    release: 'tritonish',
    set: ['gateway.extraEnv[0].name=RECOMMENDER_API_KEYS', `gateway.extraEnv[0].value=${apiKey}`],
  }).map((r) => r.object);
  const server = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'tritonish') as Obj;
  const redis = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'tritonish-redis') as Obj;
  const ctr = buildah(['from', '--name', `podsim-root-${process.pid}`, tag]).trim();
  const workDir = path.join(IMAGE_WORK, 'pod-sim');
  fs.rmSync(workDir, { recursive: true, force: true });
  let sim: PodSimulation | undefined;
  try {
    const rootfs = buildah(['mount', ctr]).trim();
    const images = simImages(objects, server.spec.template.spec.containers[0].image, builtApp(imageConfig(tag), rootfs));
    sim = PodSimulation.create({ workDir, images, objects, log: (m) => log(`pod: ${m}`) });
    const out: Record<string, unknown> = { load_factor_at_start: Number(loadFactor().toFixed(2)) };
    out.redis_ready_s = (await sim.runPod(redis)).redis;
    const ready = await sim.runPod(server);
    Object.assign(out, { engine_ready_s: ready.engine, gateway_ready_s: ready.gateway });
    for (const c of ['engine', 'gateway'])
      out[`${c}_processes`] = checkProcesses(c, initPid(sim.containers.get(`tritonish/${c}`)!)!, 10001);
    const features = Array.from({ length: 64 }, (_, i) => Math.sin(i * 0.1 + 1));
    const r = await sim.prober.http(8080, '/fn/product_recommender', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
      body: JSON.stringify({ inputs: { user_features: { data: features, shape: [1, 64] } } }),
      timeoutMs: 30_000 * loadFactor(),
    });
    const scores =
      r.status === 200 ? (JSON.parse(r.body!) as { outputs?: { scores?: { data: number[] } } }).outputs?.scores?.data : undefined;
    if (scores?.length !== 100) throw new Error(`gateway /fn/product_recommender: ${r.status ?? r.error} ${r.body?.slice(0, 200) ?? ''}`);
    log('pod: init copy exit 0, engine and gateway ready, tini PID 1, uid 10001, a function call through the gateway answers');
    for (const s of await sim.stopAll()) {
      if (s.code !== 0)
        throw new Error(
          `${s.pod}/${s.container}: ${s.code === null ? 'killed after its grace period' : `exit ${s.code ?? s.signal}`} on SIGTERM, expected 0 (logs in ${workDir}/logs)`,
        );
      out[`${s.container}_sigterm_exit_s`] = s.seconds;
    }
    return out;
  } finally {
    await sim?.cleanup({ keepLogs: true });
    buildah(['rm', ctr]);
  }
}
