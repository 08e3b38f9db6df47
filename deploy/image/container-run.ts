// Runs an image's entry the way a kubelet would, without a daemon: a buildah
// working container per container, started with `buildah run` (chroot
// isolation) inside a network namespace of the check's own, so ports 8080 or
// 9000 never meet another process on this machine. The image's ENTRYPOINT
// (tini) gets the container's args, as Kubernetes `args:` do. Stopping sends
// SIGTERM to tini itself: `buildah run` does not forward signals (it kills
// the container instead), and the point is to see the entry drain and exit 0.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { buildah, buildahArgv, imageConfig } from './buildah.ts';

export interface ContainerSpec {
  name: string;
  image: string;
  /** Appended to the image's ENTRYPOINT, as a pod's `args:` are. */
  args: string[];
  env?: Record<string, string>;
  /** host path -> container path (read-only unless it ends in ':rw'). */
  volumes?: Record<string, string>;
}

export interface Running {
  spec: ContainerSpec;
  ctr: string;
  /** The container's root folder on this machine. */
  rootfs: string;
  proc: ChildProcess;
  startedAt: number;
  exited: Promise<number | null>;
  logFile: string;
}

export const netnsPids = (ns: string): number[] =>
  spawnSync('ip', ['netns', 'pids', ns], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean).map(Number);

const comm = (pid: number): string => {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
};
const ppid = (pid: number): number => {
  try {
    return Number(
      fs
        .readFileSync(`/proc/${pid}/stat`, 'utf8')
        .replace(/^.*\) /s, '')
        .split(' ')[1],
    );
  } catch {
    return 0;
  }
};
/** Real uid of a process (from /proc/<pid>/status). */
export const uidOf = (pid: number): number => Number(/^Uid:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
const descends = (pid: number, from: number): boolean => {
  for (let p = pid; p > 1; p = ppid(p)) if (p === from) return true;
  return false;
};

/** Makes the working container and starts its entry in network namespace `ns`; output goes to `logFile`. */
export function startContainer(ns: string, spec: ContainerSpec, logFile: string): Running {
  const ctr = buildah(['from', '--name', spec.name, spec.image]).trim();
  for (const [k, v] of Object.entries(spec.env ?? {})) buildah(['config', '--env', `${k}=${v}`, ctr]);
  const rootfs = buildah(['mount', ctr]).trim();
  const vols = Object.entries(spec.volumes ?? {}).flatMap(([host, inside]) => [
    '--volume',
    `${host}:${inside.endsWith(':rw') ? inside : `${inside}:ro`}`,
  ]);
  const argv = [...imageConfig(spec.image).entrypoint, ...spec.args];
  const out = fs.openSync(logFile, 'w');
  const proc = spawn(
    'ip',
    ['netns', 'exec', ns, ...buildahArgv(['run', '--isolation', 'chroot', '--network', 'host', ...vols, ctr, '--', ...argv])],
    {
      stdio: ['ignore', out, out],
    },
  );
  fs.closeSync(out);
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  return { spec, ctr, rootfs, proc, startedAt: Date.now(), exited, logFile };
}

/** The container's processes (tini and what it runs): those in `ns` below its `buildah run`. */
export function containerPids(ns: string, r: Running): number[] {
  return netnsPids(ns).filter(
    (p) => p !== r.proc.pid && descends(p, r.proc.pid!) && !comm(p).startsWith('buildah') && !comm(p).startsWith('memfd:'),
  );
}

/** SIGTERM to the container's tini; resolves to its exit code and the seconds it took (null code: did not exit in time, killed). */
export async function stopContainer(ns: string, r: Running, timeoutMs = 60_000): Promise<{ code: number | null; seconds: number }> {
  const tini = containerPids(ns, r).find((p) => comm(p) === 'tini');
  if (!tini) throw new Error(`${r.spec.name}: no tini process found under buildah run ${r.proc.pid}`);
  const t = Date.now();
  process.kill(tini, 'SIGTERM');
  const timer = new Promise<'timeout'>((res) => setTimeout(() => res('timeout'), timeoutMs).unref());
  const code = await Promise.race([r.exited, timer]);
  if (code === 'timeout') {
    for (const p of containerPids(ns, r)) process.kill(p, 'SIGKILL');
    await r.exited;
    return { code: null, seconds: (Date.now() - t) / 1000 };
  }
  return { code, seconds: (Date.now() - t) / 1000 };
}

/** Removes the working container (its processes must be gone). */
export function removeContainer(r: Running): void {
  spawnSync(buildahArgv(['rm', r.ctr])[0]!, buildahArgv(['rm', r.ctr]).slice(1), { stdio: 'ignore' });
}
