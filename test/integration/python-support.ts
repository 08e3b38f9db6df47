// Shared setup for the python backend suites: temp repositories built from
// examples/python_models plus small test-only model.py files, the engine and
// client each suite runs on (pythonEngine), and shm checks.
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import type { EngineOptions, RunningEngine } from '../../engine/server/server.ts';
import { BUNDLED_REPO, protoLoaderClient, removeDir, ROOT, startTestEngine, type ProtoClient } from './helpers.ts';

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

/** What a python suite's tests use: its repository, the engine on it and a gRPC client. */
export interface PythonEngine {
  repo: string;
  eng: RunningEngine;
  client: ProtoClient;
}

/**
 * The engine of a python suite (call at the top of the file or of a describe):
 * before its tests `makeRepo` builds the repository, an engine starts on it
 * with `opts` and a gRPC client connects; `ready` receives the three. After
 * its tests the client closes, the engine stops and the repository goes.
 */
export function pythonEngine(makeRepo: () => string, ready: (s: PythonEngine) => void, opts: Partial<EngineOptions> = {}): void {
  const s: Partial<PythonEngine> = {};
  beforeAll(async () => {
    s.repo = makeRepo();
    s.eng = await startTestEngine({ modelRepository: s.repo, ...opts });
    s.client = protoLoaderClient(s.eng.grpcPort);
    ready(s as PythonEngine);
  }, 120_000);
  afterAll(async () => {
    s.client?.close();
    await s.eng?.stop();
    if (s.repo) removeDir(s.repo);
  });
}
