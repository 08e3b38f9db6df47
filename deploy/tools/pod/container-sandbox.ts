// Starts one container of a pod plan the way a container runtime would, with
// the tools a root shell has (no daemon, no runtime): a mount, PID and UTS
// namespace of its own (`unshare`) inside the pod's network namespace
// (`ip netns exec`), a root of its own (the image's unpacked root, or the
// host's system folders read-only, for running the image's configuration
// against a working tree), a fresh /proc and a minimal /dev, the pod's
// volumes bound where the container mounts them, the kubelet's /etc/hosts,
// the root read-only when readOnlyRootFilesystem says so, then `chroot` to
// the container's user, groups and working directory with exactly its
// environment (`env -i`), and its argv. The container's first process is PID
// 1 of its namespace, as under a runtime. No seccomp profile, cgroup limits
// or capability bounding set are applied (a non-root process has no
// capabilities anyway); docs/deploy/kubernetes.md lists what is simulated.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { ContainerPlan } from './pod-plan.ts';

/** Where a container's root filesystem comes from. */
export type RootSpec =
  /** An unpacked image root (it gets the mount points the container needs). */
  | { kind: 'rootfs'; path: string }
  /**
   * The host's /usr, /etc and the merged-/usr links, read-only, on an empty
   * root; `tmpfs` folders made empty; then each `binds` host path at its
   * container path (a file or a folder).
   */
  | { kind: 'host'; tmpfs?: string[]; binds: Array<[inside: string, host: string]> };

export interface SandboxOptions {
  netns: string;
  root: RootSpec;
  hostname: string;
  /** Volume name -> host folder. */
  volumes: Map<string, string>;
  /** Host files bound over /etc/hosts, /etc/hostname, /etc/resolv.conf. */
  etc: { hosts: string; hostname: string; resolv: string };
  /** An empty folder this container's root is assembled on. */
  mountDir: string;
  logFile: string;
}

export interface Sandboxed {
  plan: ContainerPlan;
  /** The `unshare` process (its child is the container's PID 1). */
  proc: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  logFile: string;
  startedAt: number;
}

const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
const HOST_TOP = ['usr', 'etc', 'bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32'];

/** The shell script that assembles the root in the new mount namespace, then execs the container ("$@": env assignments and argv). */
export function setupScript(plan: ContainerPlan, o: SandboxOptions): string {
  const M = o.mountDir;
  const lines = ['set -eu', `M=${q(M)}`, `hostname ${q(o.hostname)}`];
  const bindRo = (from: string, to: string) => lines.push(`mount --bind ${q(from)} ${q(to)}`, `mount -o remount,bind,ro ${q(to)}`);
  if (o.root.kind === 'rootfs') {
    lines.push(`mount --bind ${q(o.root.path)} "$M"`);
  } else {
    lines.push('mount -t tmpfs -o mode=0755 tmpfs "$M"');
    for (const top of HOST_TOP) {
      const host = `/${top}`;
      if (!fs.existsSync(host)) continue;
      if (fs.lstatSync(host).isSymbolicLink()) lines.push(`ln -s ${q(fs.readlinkSync(host))} "$M"/${top}`);
      else lines.push(`mkdir "$M"/${top}`), bindRo(host, `${M}/${top}`);
    }
    for (const dir of o.root.tmpfs ?? []) lines.push(`mkdir -p "$M"${q(dir)}`, `mount -t tmpfs -o mode=0755 tmpfs "$M"${q(dir)}`);
    for (const [inside, host] of o.root.binds) {
      const target = `${M}${inside}`;
      lines.push(fs.statSync(host).isDirectory() ? `mkdir -p ${q(target)}` : `mkdir -p ${q(path.dirname(target))} && touch ${q(target)}`);
      bindRo(host, target);
    }
    for (const m of ['proc', 'dev', 'sys', 'tmp', ...plan.mounts.map((x) => x.path.slice(1))]) lines.push(`mkdir -p "$M"/${q(m)}`);
  }
  // /proc of the new PID namespace, a minimal /dev, /sys read-only: what a runtime gives every container.
  lines.push('mount -t proc proc "$M"/proc', 'mount -t tmpfs -o mode=0755,nosuid tmpfs "$M"/dev');
  for (const d of ['null', 'zero', 'full', 'random', 'urandom', 'tty'])
    lines.push(`touch "$M"/dev/${d}`, `mount --bind /dev/${d} "$M"/dev/${d}`);
  lines.push('mkdir "$M"/dev/shm "$M"/dev/pts', 'ln -s /proc/self/fd "$M"/dev/fd');
  lines.push('mount --rbind /sys "$M"/sys', 'mount -o remount,bind,ro "$M"/sys');
  for (const m of plan.mounts) {
    const host = o.volumes.get(m.volume);
    if (!host) throw new Error(`container ${plan.name}: volume '${m.volume}' has no folder`);
    lines.push(`mkdir -p "$M"${q(m.path)}`, `mount --bind ${q(host)} "$M"${q(m.path)}`);
    if (m.readOnly) lines.push(`mount -o remount,bind,ro "$M"${q(m.path)}`);
  }
  for (const [file, host] of [
    ['hosts', o.etc.hosts],
    ['hostname', o.etc.hostname],
    ['resolv.conf', o.etc.resolv],
  ] as const) {
    lines.push(
      `[ -e "$M"/etc/${file} ] || touch "$M"/etc/${file}`,
      `mount --bind ${q(host)} "$M"/etc/${file}`,
      `mount -o remount,bind,ro "$M"/etc/${file}`,
    );
  }
  if (plan.readOnlyRoot) lines.push(o.root.kind === 'rootfs' ? 'mount -o remount,bind,ro "$M"' : 'mount -o remount,ro "$M"');
  const groups = (plan.groups.length ? plan.groups : [plan.gid]).join(',');
  const chroot = `chroot --userspec=${plan.uid}:${plan.gid} --groups=${groups} "$M" /usr/bin/env -i -C ${q(plan.workingDir)} "$@"`;
  lines.push(`exec ${plan.noNewPrivs ? 'setpriv --no-new-privs ' : ''}${chroot}`);
  return `${lines.join('\n')}\n`;
}

/** Starts the container; its output goes to `o.logFile`. */
export function startSandboxed(plan: ContainerPlan, o: SandboxOptions): Sandboxed {
  fs.mkdirSync(o.mountDir, { recursive: true });
  if (o.root.kind === 'rootfs') {
    // Mount points the image lacks, made in its (writable, unpacked) root as a runtime makes them.
    for (const m of ['proc', 'dev', 'sys', 'tmp', 'etc', ...plan.mounts.map((x) => x.path.slice(1))])
      fs.mkdirSync(path.join(o.root.path, m), { recursive: true });
  }
  const script = setupScript(plan, o);
  const env = plan.env.map(([k, v]) => `${k}=${v}`);
  const out = fs.openSync(o.logFile, 'w');
  const proc = spawn(
    'ip',
    [
      'netns',
      'exec',
      o.netns,
      'unshare',
      '--mount',
      '--propagation',
      'private',
      '--pid',
      '--uts',
      '--fork',
      '--kill-child',
      '--',
      'sh',
      '-c',
      script,
      'sh',
      ...env,
      ...plan.argv,
    ],
    {
      stdio: ['ignore', out, out],
    },
  );
  fs.closeSync(out);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return { plan, proc, exited, logFile: o.logFile, startedAt: Date.now() };
}

/** Children of `pid` (from /proc). */
export function childPids(pid: number): number[] {
  try {
    return fs
      .readdirSync(`/proc/${pid}/task`)
      .flatMap((t) => fs.readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').split(' ').filter(Boolean).map(Number));
  } catch {
    return [];
  }
}

/** The host pid of the container's PID 1 (the unshare process's child), or undefined before it exists or after it exits. */
export const initPid = (s: Sandboxed): number | undefined => (s.proc.pid ? childPids(s.proc.pid)[0] : undefined);

/** The last lines of a container's output, for error messages. */
export function logTail(s: Sandboxed, lines = 15): string {
  try {
    return fs.readFileSync(s.logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no output)';
  }
}
