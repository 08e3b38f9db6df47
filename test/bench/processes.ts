// Child processes for the benchmarks: start a TypeScript entry point under
// tsx on free ports, wait until it answers, read its resident memory, stop it.
// Every child started here is tracked so `stopAll()` can end them on exit.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../fixtures/net.ts';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** A child process started by the bench. */
export interface Child {
  name: string;
  proc: ChildProcess;
  /** Last lines of its stderr/stdout (for error messages). */
  tail(): string;
}

const children = new Set<Child>();
const tempDirs = new Set<string>();

/** Remember a temp dir so stopAll() removes it even when a run is cut short. */
export function trackTempDir(dir: string): string {
  tempDirs.add(dir);
  return dir;
}

/** Remove a temp dir now (and forget it). */
export function removeTempDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  tempDirs.delete(dir);
}

export { freePort };

// BENCH_COMPILED=1 starts every bench run that way (what production runs).
let compiled = process.env.BENCH_COMPILED === '1';
/**
 * From now on, engine/ and gateway/ entries run from dist/ (`npm run build`'s
 * JavaScript, as `npm start` and the image run them) instead of through tsx.
 */
export function runCompiled(on: boolean): void {
  compiled = on;
}

/** Track a child started elsewhere (e.g. the FastAPI peer) so stopAll() ends it too, also on a signal. */
export function trackChild(child: Child): Child {
  children.add(child);
  child.proc.once('exit', () => children.delete(child));
  return child;
}

/** `node --import tsx <script> ...args` from the repository root (or its dist/ .js, see runCompiled); the pid is node's own. */
export function spawnTs(
  name: string,
  script: string,
  args: string[],
  env: Record<string, string> = {},
  nodeFlags: string[] = [],
  /** 'pipe': the parent writes to the child's stdin (a start signal); 'ignore' by default. */
  stdin: 'ignore' | 'pipe' = 'ignore',
): Child {
  const fromDist = compiled && /^(engine|gateway)\//.test(script);
  const entry = fromDist ? ['dist', script.replace(/\.ts$/, '.js')] : [script];
  const proc = spawn(process.execPath, [...(fromDist ? [] : ['--import', 'tsx']), ...nodeFlags, path.resolve(ROOT, ...entry), ...args], {
    cwd: ROOT,
    env: { ...process.env, ENGINE_QUIET: '1', ...env },
    stdio: [stdin, 'pipe', 'pipe'],
  });
  let log = '';
  const keep = (d: Buffer) => {
    log = (log + d.toString()).slice(-4000);
  };
  proc.stdout!.on('data', keep);
  proc.stderr!.on('data', keep);
  const child: Child = { name, proc, tail: () => log.split('\n').slice(-15).join('\n') };
  return trackChild(child);
}

/** Poll `probe` until it resolves true; fail naming the child if it exits or `timeoutMs` passes. */
export async function waitUntil(child: Child, probe: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.proc.exitCode !== null || child.proc.signalCode !== null) {
      throw new Error(`${child.name} exited (${child.proc.exitCode ?? child.proc.signalCode}) before it was ready:\n${child.tail()}`);
    }
    try {
      if (await probe()) return;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`${child.name} not ready after ${timeoutMs} ms:\n${child.tail()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves when the child has exited. */
export function stopChild(child: Child, graceMs = 10_000): Promise<void> {
  const p = child.proc;
  if (p.exitCode !== null || p.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => p.kill('SIGKILL'), graceMs);
    p.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    p.kill('SIGTERM');
  });
}

/** Stop every child still running and remove tracked temp dirs (on the way out, also after a failure). */
export async function stopAll(): Promise<void> {
  await Promise.all([...children].map((c) => stopChild(c, 5000)));
  for (const dir of [...tempDirs]) removeTempDir(dir);
}

/** Resident set size (VmRSS) of a process in MiB, from /proc/<pid>/status. */
export function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(m[1]) / 1024;
}

/** Clock ticks per second of /proc times (USER_HZ; 100 on Linux x86-64 and arm64). */
const USER_HZ = 100;

function ticks(statFile: string): number {
  const st = readFileSync(statFile, 'utf8');
  const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
  return Number(f[11]) + Number(f[12]); // utime + stime
}

/**
 * CPU seconds a process has used: its main thread, and in all (every thread,
 * exited ones included: workers, libuv, GC, ORT).
 */
export function cpuSeconds(pid: number): { main: number; total: number } {
  return { main: ticks(`/proc/${pid}/task/${pid}/stat`) / USER_HZ, total: ticks(`/proc/${pid}/stat`) / USER_HZ };
}
