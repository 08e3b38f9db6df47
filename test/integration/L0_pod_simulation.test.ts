// The chart's default install, run as the pod would run it (issue 39), on the
// working tree: the real Helm renders the chart, then deploy/tools/pod runs
// every container with the rendered command lines, users, volumes and
// environment (the Secret's key included), /app mapped to the working tree
// and deploy/Dockerfile's ENTRYPOINT (tini), in namespaces of its own (root
// needed, as in CI). The dev Redis pod first, then the server pod: the init
// copy exits 0, engine and gateway answer their probes, tini is PID 1 and
// node is not, the gateway serves a call through Redis-backed state, and
// SIGTERM stops each container with exit 0 within its grace period. The init
// command the chart had before (`cp -a`) fails the same simulation the way
// Kubernetes failed it. `npm run image:check` runs the same on the built image.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { helmTemplate } from '../../deploy/tools/helm-render.ts';
import { initPid, PodSimulation, type StopResult } from '../../deploy/tools/pod/pod-run.ts';
import { childPids } from '../../deploy/tools/pod/container-sandbox.ts';
import { simImages, workingTreeApp } from '../../deploy/tools/pod/sim-images.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const API_KEY = `podsim-${process.pid}`;
type Obj = Record<string, any>;

let objects: Obj[];
let sim: PodSimulation;
const workload = (name: string) => objects.find((o) => o.kind === 'Deployment' && o.metadata.name === name)!;
const workDirs: string[] = [];

/** Status lines of a host pid: its pid inside its PID namespace (last NSpid field), uid, command. */
function proc(pid: number): { nsPid: number; uid: number; comm: string } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return {
    nsPid: Number(/^NSpid:\s+(.*)$/m.exec(status)![1]!.trim().split(/\s+/).pop()),
    uid: Number(/^Uid:\s+(\d+)/m.exec(status)![1]),
    comm: fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim(),
  };
}

function simulation(objs: Obj[]): PodSimulation {
  const image = workload('tritonish').spec.template.spec.containers[0].image;
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'podsim-'));
  workDirs.push(workDir);
  return PodSimulation.create({ workDir, images: simImages(objs, image, workingTreeApp(ROOT)), objects: objs });
}

beforeAll(() => {
  if (process.getuid?.() !== 0) throw new Error('L0_pod_simulation needs root (network, mount and PID namespaces)');
  execFileSync(process.execPath, ['scripts/build.mjs', '--if-stale'], { cwd: ROOT, stdio: 'pipe' });
  // The default values; the API key the bundled recommender function asks for, given the way values give env.
  objects = helmTemplate(3, path.join(ROOT, 'deploy/helm/tritonish'), {
    release: 'tritonish',
    set: ['gateway.extraEnv[0].name=RECOMMENDER_API_KEYS', `gateway.extraEnv[0].value=${API_KEY}`],
  }).map((r) => r.object);
  sim = simulation(objects);
}, 300_000);

afterAll(async () => {
  await sim?.cleanup();
  for (const d of workDirs) fs.rmSync(d, { recursive: true, force: true });
});

describe('the default install, run as the pod would run it', () => {
  it('the dev Redis pod becomes ready', async () => {
    expect(Object.keys(await sim.runPod(workload('tritonish-redis')))).toEqual(['redis']);
  }, 120_000);

  it('the server pod: the init copy exits 0, then engine and gateway answer their startup and readiness probes', async () => {
    const ready = await sim.runPod(workload('tritonish'));
    expect(Object.keys(ready).sort()).toEqual(['engine', 'gateway']);
  }, 900_000);

  it('tini is PID 1 of each container, node is not, and an orphan left in the container is reaped', async () => {
    for (const name of ['engine', 'gateway']) {
      const s = sim.containers.get(`tritonish/${name}`)!;
      const pid1 = initPid(s)!;
      expect(proc(pid1)).toEqual({ nsPid: 1, uid: 10001, comm: 'tini' });
      const [node] = childPids(pid1);
      expect(proc(node!)).toMatchObject({ uid: 10001, comm: expect.stringMatching(/^(node|MainThread)$/) });
      expect(proc(node!).nsPid).not.toBe(1);
    }
    // A process that leaves a child behind (as a Python stub's helper might): the orphan goes to PID 1, which must reap it.
    const engine = initPid(sim.containers.get('tritonish/engine')!)!;
    execFileSync('nsenter', [
      '-t',
      String(engine),
      '--mount',
      '--pid',
      '--root',
      '--wd',
      '-S',
      '10001',
      '-G',
      '10001',
      'sh',
      '-c',
      'sleep 1 >/dev/null 2>&1 & exit 0',
    ]);
    const zombies = () =>
      childPids(engine).filter((p) => fs.existsSync(`/proc/${p}`) && /^State:\s+Z/m.test(fs.readFileSync(`/proc/${p}/status`, 'utf8')));
    const orphan = childPids(engine).find((p) => proc(p).comm === 'sleep');
    expect(orphan, 'the orphaned sleep was handed to the container PID 1').toBeDefined();
    await new Promise((r) => setTimeout(r, 2500));
    expect(zombies()).toEqual([]);
    expect(fs.existsSync(`/proc/${orphan}`)).toBe(false);
    const redis = initPid(sim.containers.get('tritonish-redis/redis')!)!;
    expect(proc(redis)).toMatchObject({ nsPid: 1, uid: 999 });
  });

  it('a function call through the gateway answers, its state in the dev Redis', async () => {
    const features = Array.from({ length: 64 }, (_, i) => Math.sin(i));
    const r = await sim.prober.http(8080, '/fn/product_recommender', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': API_KEY },
      body: JSON.stringify({ inputs: { user_features: { data: features, shape: [1, 64] } } }),
      timeoutMs: 30_000,
    });
    expect(r.status, r.body ?? r.error).toBe(200);
    expect((JSON.parse(r.body!) as { outputs: { scores: { data: number[] } } }).outputs.scores.data).toHaveLength(100);
    const ready = JSON.parse((await sim.prober.http(8080, '/readyz', { timeoutMs: 10_000 })).body!) as { leaseStore: { kind: string } };
    expect(ready.leaseStore.kind).toBe('redis');
  }, 60_000);

  it('SIGTERM: every container exits 0 within its grace period', async () => {
    const stopped: StopResult[] = await sim.stopAll();
    expect(stopped.map((s) => `${s.pod}/${s.container}`)).toEqual(['tritonish/gateway', 'tritonish/engine', 'tritonish-redis/redis']);
    for (const s of stopped) expect(s, `${s.pod}/${s.container}`).toMatchObject({ code: 0, signal: null });
  }, 300_000);
});

describe('the init command the chart had before issue 39', () => {
  it('cp -a into the kubelet-made emptyDir exits 1: Init:CrashLoopBackOff, as on a cluster', async () => {
    const before = structuredClone(objects);
    const d = before.find((o) => o.kind === 'Deployment' && o.metadata.name === 'tritonish')!;
    d.spec.template.spec.initContainers[0].args = ['cp -a /app/model_repository/. /models/'];
    const old = simulation(before);
    try {
      await expect(old.runPod(d)).rejects.toThrow(
        /init container copy-models exited 1, so the pod would stay in Init:CrashLoopBackOff; its output:\ncp: preserving times for '\/models\/\.': Operation not permitted/,
      );
    } finally {
      await old.cleanup();
    }
  }, 120_000);
});
