// Which interpreter runs a python model: an environment without numpy makes
// the model UNAVAILABLE saying exactly that (a real venv, no numpy in it);
// the engine's --backend-config=python,python-executable=... applies to every
// python model; a model's EXECUTION_ENV_PATH overrides it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { removeDir, startTestEngine } from './helpers.ts';
import { pythonRepo } from './python-support.ts';
import type { RunningEngine } from '../../engine/server/server.ts';
import { parseEngineArgs } from '../../engine/server/cli-options.ts';

let venv: string;
let repo: string;
let eng: RunningEngine;
/** The interpreter `python3` on PATH really is (it has numpy). */
const realPython = execFileSync('python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' }).trim();

beforeAll(async () => {
  venv = mkdtempSync(path.join(os.tmpdir(), `py-nonumpy-${process.pid}-`));
  execFileSync('python3', ['-m', 'venv', '--without-pip', venv]);
  repo = pythonRepo('l0-python-env', ['add_sub']);
  // A copy of add_sub pinned to the interpreter that has numpy.
  const pinned = path.join(repo, 'add_sub_pinned');
  execFileSync('cp', ['-r', path.join(repo, 'add_sub'), pinned]);
  const cfg = readFileSync(path.join(pinned, 'config.pbtxt'), 'utf8').replace('name: "add_sub"', 'name: "add_sub_pinned"');
  writeFileSync(
    path.join(pinned, 'config.pbtxt'),
    `${cfg}\nparameters { key: "EXECUTION_ENV_PATH" value: { string_value: "${realPython}" } }\n`,
  );
  const opts = parseEngineArgs([`--model-repository=${repo}`, `--backend-config=python,execution-env-path=${venv}`]);
  eng = await startTestEngine({ modelRepository: repo, backendConfig: opts.backendConfig });
}, 60_000);

afterAll(async () => {
  await eng?.stop();
  removeDir(repo);
  removeDir(venv);
});

describe('L0_python_env', () => {
  it('an interpreter without numpy: UNAVAILABLE with that reason; a model pinned elsewhere loads', () => {
    const index = eng.server.repositoryIndex(false);
    const bad = index.find((m) => m.name === 'add_sub')!;
    expect(bad.state).toBe('UNAVAILABLE');
    expect(bad.reason).toBe(
      `python interpreter '${path.join(venv, 'bin', 'python3')}' cannot import numpy (ModuleNotFoundError: No module named 'numpy')`,
    );
    expect(index.find((m) => m.name === 'add_sub_pinned')!.state).toBe('READY');
  });
});
