// Thin helpers around Debian's buildah for the image check: daemonless, the
// vfs storage driver (no overlay or fuse needed), chroot isolation, the
// host's network (or the network namespace the caller runs in), and a
// storage root of its own (IMAGE_CHECK_DIR, default /var/tmp/tritonish-image-check:
// gigabytes of unpacked layers, kept out of the repository) so the check never
// touches another user's containers or images.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export const IMAGE_WORK = path.resolve(process.env.IMAGE_CHECK_DIR || '/var/tmp/tritonish-image-check');
const STORAGE = ['--root', path.join(IMAGE_WORK, 'storage'), '--runroot', path.join(IMAGE_WORK, 'run'), '--storage-driver', 'vfs'];

const t0 = Date.now();
/** A progress line with the seconds since the check started. */
export const log = (msg: string) => process.stdout.write(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(6)} s] ${msg}\n`);

/** Runs a command with its output shown; throws naming the command when it fails. */
export function run(cmd: string, args: string[], o: { timeoutMs?: number } = {}): void {
  const r = spawnSync(cmd, args, { stdio: 'inherit', timeout: o.timeoutMs });
  if (r.status !== 0)
    throw new Error(`${cmd} ${args.slice(0, 3).join(' ')} ... failed (${r.error?.message ?? `exit ${r.status ?? r.signal}`})`);
}

/** The buildah command line (storage options first) for `args`. */
export const buildahArgv = (args: string[]): string[] => ['buildah', ...STORAGE, ...args];

/** Runs buildah and returns its standard output. */
export function buildah(args: string[], o: { timeoutMs?: number } = {}): string {
  fs.mkdirSync(IMAGE_WORK, { recursive: true });
  return execFileSync('buildah', [...STORAGE, ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    timeout: o.timeoutMs,
    maxBuffer: 64 << 20,
  });
}

export function imageExists(name: string): boolean {
  return spawnSync('buildah', [...STORAGE, 'inspect', '--type', 'image', name], { stdio: 'ignore' }).status === 0;
}

export interface ImageConfig {
  entrypoint: string[];
  cmd: string[];
  user: string;
  workingDir: string;
  env: string[];
}

export function imageConfig(name: string): ImageConfig {
  const c = JSON.parse(buildah(['inspect', '--type', 'image', name])).OCIv1.config as Record<string, any>;
  return { entrypoint: c.Entrypoint ?? [], cmd: c.Cmd ?? [], user: c.User ?? '', workingDir: c.WorkingDir ?? '/', env: c.Env ?? [] };
}

/** Bytes under `dir` (du -sb). */
export const diskBytes = (dir: string): number => Number(execFileSync('du', ['-sb', dir], { encoding: 'utf8' }).split('\t')[0]);
