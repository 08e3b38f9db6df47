// Shared setup for the python backend suites: temp repositories built from
// examples/python_models plus small test-only model.py files, and shm checks.
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BUNDLED_REPO, ROOT } from './helpers.ts';

export const EXAMPLES = path.join(ROOT, 'examples', 'python_models');

/** A temp repository with these example models, bundled models and extra {name: {config, model}} models. */
export function pythonRepo(
  prefix: string,
  examples: string[],
  extra: Record<string, { config: string; model: string }> = {},
  bundled: string[] = [],
): string {
  const repo = mkdtempSync(path.join(os.tmpdir(), `${prefix}-${process.pid}-`));
  for (const m of examples) cpSync(path.join(EXAMPLES, m), path.join(repo, m), { recursive: true });
  for (const m of bundled) cpSync(path.join(BUNDLED_REPO, m), path.join(repo, m), { recursive: true });
  for (const [name, { config, model }] of Object.entries(extra)) {
    mkdirSync(path.join(repo, name, '1'), { recursive: true });
    writeFileSync(path.join(repo, name, 'config.pbtxt'), config);
    writeFileSync(path.join(repo, name, '1', 'model.py'), model);
  }
  return repo;
}

/** /dev/shm entries this engine process's python instances own. */
export function pythonShmEntries(): string[] {
  return readdirSync('/dev/shm').filter((n) => n.startsWith(`tpy.${process.pid}.`));
}

/** Whether a process with this pid exists (and is not a zombie). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.split(') ')[1]?.[0] !== 'Z';
  } catch {
    return false;
  }
}
