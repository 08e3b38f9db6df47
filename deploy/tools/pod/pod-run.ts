// over 300 lines: past 300 only since the formatter wrapped its long lines (issue 38); to be split
// Runs the pods of a rendered manifest on this machine as the kubelet would
// (needs root): each pod's volumes made as the kubelet makes them, its init
// containers one after another (each must exit 0), then its containers
// together, each ready once its startup and readiness probes answer. All the
// simulated pods share one network namespace of their own (so no port of
// this machine is taken), and /etc/hosts points the manifest's Service names
// at it, as cluster DNS would point them at the pods behind them.
//
// Deadlines are Kubernetes' own (a startup probe's initialDelaySeconds +
// periodSeconds x failureThreshold; the grace period after SIGTERM) scaled
// by the host's load (load average per core, at least 1) and re-read while
// waiting; a container that exits while it is waited for fails at once with
// its output, instead of waiting for a deadline.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { childPids, initPid, logTail, startSandboxed, type RootSpec, type Sandboxed } from './container-sandbox.ts';
import type { Obj } from './env-vars.ts';
import type { ImageConfig } from './image-config.ts';
import { podPlan, type PodPlan, type Probe, type VolumePlan } from './pod-plan.ts';
import { Prober } from './prober-client.ts';

export interface SimImage {
  config: ImageConfig;
  root: RootSpec;
}

export interface SimulationOptions {
  /** A folder of the simulation's own (volumes, mount points, logs); removed at the end unless keepLogs. */
  workDir: string;
  images: Map<string, SimImage>;
  /** The rendered manifest, plus objects the cluster already holds (an existing Secret). */
  objects: Obj[];
  log?: (msg: string) => void;
}

export interface StopResult {
  pod: string;
  container: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  seconds: number;
}

/** The host's load per core, at least 1: what every deadline is multiplied by. */
export const loadFactor = (): number => Math.max(1, os.loadavg()[0]! / os.availableParallelism());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Seconds of a preStop `sleep N` hook (0 without one): the order the kubelet's SIGTERMs effectively arrive in. */
const preStopSeconds = (c: Obj): number => {
  const cmd = c.lifecycle?.preStop?.exec?.command as string[] | undefined;
  return cmd?.[0] === 'sleep' ? Number(cmd[1]) || 0 : 0;
};

export class PodSimulation {
  readonly netns = `podsim-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  readonly prober: Prober;
  /** Running containers by "pod/container" (init containers included while they run). */
  readonly containers = new Map<string, Sandboxed>();
  private readonly tmpfsMounts: string[] = [];
  private readonly started: Array<{ pod: string; container: Obj; s: Sandboxed; graceS: number }> = [];
  private readonly log: (msg: string) => void;

  private constructor(private readonly o: SimulationOptions) {
    this.log = o.log ?? (() => {});
    fs.mkdirSync(o.workDir, { recursive: true });
    execFileSync('ip', ['netns', 'add', this.netns]);
    execFileSync('ip', ['-n', this.netns, 'link', 'set', 'lo', 'up']);
    this.prober = new Prober(this.netns);
  }

  /** Creates the namespace and the prober; nothing runs yet. */
  static create(o: SimulationOptions): PodSimulation {
    return new PodSimulation(o);
  }

  /** The plan of `workload` with this simulation's images and objects. */
  plan(workload: Obj): PodPlan {
    return podPlan(workload, new Map([...this.o.images].map(([k, v]) => [k, v.config])), this.o.objects);
  }

  /** Runs `workload`'s pod: init containers in order, then the containers until each is ready. Resolves with seconds to ready per container. */
  async runPod(workload: Obj): Promise<Record<string, number>> {
    const plan = this.plan(workload);
    const pod = workload.metadata.name as string;
    const volumes = this.makeVolumes(pod, plan);
    const etc = this.etcFiles(pod);
    const spec = workload.spec.template.spec as Obj;
    const start = (c: PodPlan['containers'][number]) => {
      const image = this.o.images.get(c.image)!;
      const s = startSandboxed(c, {
        netns: this.netns,
        root: image.root,
        hostname: `${pod}-sim`,
        volumes,
        etc,
        mountDir: path.join(this.o.workDir, 'mnt', `${pod}-${c.name}`),
        logFile: path.join(this.o.workDir, 'logs', `${pod}-${c.name}.log`),
      });
      this.containers.set(`${pod}/${c.name}`, s);
      return s;
    };
    fs.mkdirSync(path.join(this.o.workDir, 'logs'), { recursive: true });
    for (const c of plan.initContainers) {
      this.log(`${pod}: init container ${c.name}: ${c.argv.join(' ')} (uid ${c.uid})`);
      const s = start(c);
      const { code, signal } = await this.within(`${pod}: init container ${c.name} to exit`, 600, () => s.exited, s);
      if (code !== 0)
        throw new Error(
          `${pod}: init container ${c.name} exited ${code ?? signal}, so the pod would stay in Init:CrashLoopBackOff; its output:\n${logTail(s)}`,
        );
      this.log(`${pod}: init container ${c.name} exited 0 in ${((Date.now() - s.startedAt) / 1000).toFixed(1)} s`);
    }
    const running = plan.containers.map((c) => {
      this.log(`${pod}: container ${c.name}: ${c.argv.join(' ')} (uid ${c.uid})`);
      const s = start(c);
      this.started.push({
        pod,
        container: (spec.containers as Obj[]).find((x) => x.name === c.name)!,
        s,
        graceS: plan.terminationGracePeriodSeconds,
      });
      return s;
    });
    const ready: Record<string, number> = {};
    await Promise.all(
      running.map(async (s) => {
        const c = s.plan;
        if (c.startupProbe) await this.probeUntil(pod, c.name, 'startup', c.startupProbe, s);
        if (c.readinessProbe) await this.probeUntil(pod, c.name, 'readiness', c.readinessProbe, s, c.startupProbe);
        ready[c.name] = (Date.now() - s.startedAt) / 1000;
        this.log(`${pod}: container ${c.name} ready in ${ready[c.name]!.toFixed(1)} s`);
      }),
    );
    return ready;
  }

  /**
   * SIGTERM to each started container's PID 1: the pods last started first (the
   * server before the Redis it uses), within a pod the shortest preStop pause
   * first (the order the kubelet's signals arrive in after those pauses, which
   * are not waited out here); each waited for up to its grace period (load-scaled).
   */
  async stopAll(): Promise<StopResult[]> {
    const out: StopResult[] = [];
    const pods = [...new Set(this.started.map((x) => x.pod))].reverse();
    const order = pods.flatMap((p) =>
      this.started.filter((x) => x.pod === p).sort((a, b) => preStopSeconds(a.container) - preStopSeconds(b.container)),
    );
    for (const { pod, s, graceS } of order) {
      const pid = initPid(s);
      const t = Date.now();
      if (pid) process.kill(pid, 'SIGTERM');
      const r = await Promise.race([s.exited, sleep(graceS * 1000 * loadFactor()).then(() => undefined)]);
      if (!r) s.proc.kill('SIGKILL');
      const { code, signal } = r ?? (await s.exited);
      out.push({ pod, container: s.plan.name, code: r ? code : null, signal, seconds: (Date.now() - t) / 1000 });
      this.log(
        `${pod}: container ${s.plan.name} ${r ? `exited ${code ?? signal}` : 'killed after the grace period'} ${((Date.now() - t) / 1000).toFixed(1)} s after SIGTERM`,
      );
    }
    return out;
  }

  /** Kills whatever still runs in the namespace, unmounts the memory volumes, removes the namespace and the work folder (the logs too unless keepLogs). */
  async cleanup(o: { keepLogs?: boolean } = {}): Promise<void> {
    this.prober.close();
    const pids = spawnSync('ip', ['netns', 'pids', this.netns], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean).map(Number);
    for (const p of pids) {
      try {
        process.kill(p, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    await Promise.all([...this.containers.values()].map((s) => s.exited));
    for (const m of this.tmpfsMounts) spawnSync('umount', ['-l', m]);
    spawnSync('ip', ['netns', 'del', this.netns]);
    for (const d of ['volumes', 'mnt', 'etc', ...(o.keepLogs ? [] : ['logs'])])
      fs.rmSync(path.join(this.o.workDir, d), { recursive: true, force: true });
  }

  /** Resolves `what` or throws when the container exits first or the load-scaled deadline passes. */
  private async within<T>(what: string, budgetS: number, wait: () => Promise<T>, s: Sandboxed): Promise<T> {
    const t0 = Date.now();
    const done = wait();
    for (;;) {
      const r = await Promise.race([done.then((v) => ({ v })), sleep(500).then(() => undefined)]);
      if (r) return r.v;
      if (Date.now() - t0 > budgetS * 1000 * loadFactor())
        throw new Error(`${what}: not within ${budgetS} s x load factor ${loadFactor().toFixed(1)}; output:\n${logTail(s)}`);
    }
  }

  private async probeUntil(pod: string, name: string, kind: string, p: Probe, s: Sandboxed, startup?: Probe): Promise<void> {
    // A startup probe's own budget; readiness, which Kubernetes never gives up on, gets the startup budget or a minute.
    const budget = (q: Probe) => q.initialDelaySeconds + q.periodSeconds * q.failureThreshold;
    const budgetS = kind === 'startup' ? budget(p) : Math.max(60, startup ? budget(startup) : 0);
    const t0 = Date.now();
    let last = '';
    await sleep(p.initialDelaySeconds * 1000);
    let exited: string | undefined;
    void s.exited.then(({ code, signal }) => (exited = `${code ?? signal}`));
    for (;;) {
      if (exited !== undefined)
        throw new Error(`${pod}: container ${name} exited ${exited} before its ${kind} probe answered; its output:\n${logTail(s)}`);
      if (p.kind === 'tcp') {
        if (await this.prober.tcp(p.port, p.timeoutSeconds * 1000)) return;
        last = `TCP ${p.port} refused`;
      } else {
        const a = await this.prober.http(p.port, p.path!, { timeoutMs: p.timeoutSeconds * 1000 * loadFactor() });
        if (a.status !== undefined && a.status >= 200 && a.status < 400) return;
        last = a.error ?? `HTTP ${a.status} ${a.body?.slice(0, 200)}`;
      }
      if (Date.now() - t0 > budgetS * 1000 * loadFactor()) {
        throw new Error(
          `${pod}: container ${name}: ${kind} probe ${p.kind === 'http' ? `GET :${p.port}${p.path}` : `TCP :${p.port}`} still failing after ${budgetS} s x load factor ${loadFactor().toFixed(1)} (${last}); output:\n${logTail(s)}`,
        );
      }
      await sleep(Math.min(p.periodSeconds, 1) * 1000);
    }
  }

  /**
   * emptyDirs as the kubelet makes them (root-owned, 0777; Memory: a tmpfs; fsGroup: group-owned, setgid, group-writable);
   * configMap/secret volumes as read-only files; a claim as a fresh provisioned volume (root-owned 0755: writable by a
   * non-root container only through fsGroup, the strict case among provisioners).
   */
  private makeVolumes(pod: string, plan: PodPlan): Map<string, string> {
    const out = new Map<string, string>();
    for (const v of plan.volumes) {
      const dir = path.join(this.o.workDir, 'volumes', pod, v.name);
      fs.mkdirSync(dir, { recursive: true });
      fs.chmodSync(dir, 0o777);
      if (v.kind === 'emptyDir' && v.medium === 'Memory') {
        execFileSync('mount', ['-t', 'tmpfs', '-o', `mode=1777${v.sizeLimit ? `,size=${quantityBytes(v.sizeLimit)}` : ''}`, 'tmpfs', dir]);
        this.tmpfsMounts.push(dir);
      }
      if (v.kind === 'configMap' || v.kind === 'secret') this.writeFiles(dir, v);
      if (v.kind === 'persistentVolumeClaim') fs.chmodSync(dir, 0o755);
      if (plan.fsGroup !== undefined) setVolumeOwnership(dir, plan.fsGroup, v.kind === 'configMap' || v.kind === 'secret');
      out.set(v.name, dir);
    }
    return out;
  }

  private writeFiles(dir: string, v: Extract<VolumePlan, { files: unknown }>): void {
    fs.chmodSync(dir, 0o755);
    for (const [k, text] of Object.entries(v.files)) fs.writeFileSync(path.join(dir, k), text, { mode: 0o644 });
  }

  /** The kubelet's /etc/hosts (the manifest's Services pointed at the shared loopback), /etc/hostname, /etc/resolv.conf for `pod`. */
  private etcFiles(pod: string): { hosts: string; hostname: string; resolv: string } {
    const dir = path.join(this.o.workDir, 'etc', pod);
    fs.mkdirSync(dir, { recursive: true });
    const services = this.o.objects.filter((o) => o.kind === 'Service').map((o) => o.metadata.name as string);
    const names = services.flatMap((s) => [s, `${s}.default`, `${s}.default.svc`, `${s}.default.svc.cluster.local`]);
    const files = {
      hosts: `127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.0.1\t${pod}-sim\n${names.map((n) => `127.0.0.1\t${n}`).join('\n')}\n`,
      hostname: `${pod}-sim\n`,
      resolv: 'search default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n',
    };
    for (const [k, text] of Object.entries(files)) fs.writeFileSync(path.join(dir, k), text, { mode: 0o644 });
    return { hosts: path.join(dir, 'hosts'), hostname: path.join(dir, 'hostname'), resolv: path.join(dir, 'resolv') };
  }
}

/** The kubelet's SetVolumeOwnership on a fresh volume: group fsGroup, group read(-write), setgid on folders. */
function setVolumeOwnership(dir: string, fsGroup: number, readOnly: boolean): void {
  const walk = (p: string) => {
    const st = fs.lstatSync(p);
    if (st.isSymbolicLink()) return;
    fs.chownSync(p, st.uid, fsGroup);
    const mask = (readOnly ? 0o040 : 0o060) | (st.isDirectory() ? 0o2010 : 0);
    fs.chmodSync(p, (st.mode & 0o7777) | mask);
    if (st.isDirectory()) for (const e of fs.readdirSync(p)) walk(path.join(p, e));
  };
  walk(dir);
}

/** A Kubernetes quantity ("1Gi", "512Mi", "1000000") in bytes. */
export function quantityBytes(q: string | number): number {
  const m = /^(\d+(?:\.\d+)?)([KMGTPE]i?|k|m)?$/.exec(String(q));
  if (!m) throw new Error(`'${q}' is not a quantity this simulation reads`);
  const pow: Record<string, number> = {
    k: 1e3,
    K: 1e3,
    M: 1e6,
    G: 1e9,
    T: 1e12,
    P: 1e15,
    E: 1e18,
    Ki: 2 ** 10,
    Mi: 2 ** 20,
    Gi: 2 ** 30,
    Ti: 2 ** 40,
    Pi: 2 ** 50,
    Ei: 2 ** 60,
    m: 1e-3,
  };
  return Math.ceil(Number(m[1]) * (m[2] ? pow[m[2]]! : 1));
}

export { childPids, initPid, logTail };
