// A model repository that is not there (issue 21, item 6): Triton exits with
// "error: creating server: Internal - failed to stat file <path>", so a wrong
// mount or KServe storageUri fails its pod instead of serving no models while
// looking healthy. --exit-on-error=false starts anyway, saying why.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { startTestEngine, ROOT } from './helpers.ts';

/** Run the engine process (engine/main.ts) until it exits or `until` matches its stderr; then stop it. */
function runEngine(args: string[], until?: RegExp, timeoutMs = 60_000): Promise<{ code: number | null; stderr: string; matched: boolean }> {
  return new Promise((resolve, reject) => {
    const p = spawn(
      process.execPath,
      ['--import', 'tsx', 'engine/main.ts', '--grpc-port=0', '--http-port=0', '--metrics-port=0', '--http-address=127.0.0.1', ...args],
      {
        cwd: ROOT,
        env: { ...process.env, ENGINE_QUIET: '0' },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    let stderr = '';
    let matched = false;
    const timer = setTimeout(() => {
      p.kill('SIGKILL');
      reject(new Error(`engine neither exited nor matched within ${timeoutMs} ms:\n${stderr}`));
    }, timeoutMs);
    p.stderr!.on('data', (d: Buffer) => {
      stderr += d.toString();
      if (until && !matched && until.test(stderr)) {
        matched = true;
        p.kill('SIGTERM');
      }
    });
    p.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr, matched });
    });
  });
}

describe('L0_repository_missing', () => {
  const missing = path.join(os.tmpdir(), `no-such-repo-${process.pid}`);

  it("the engine process exits 1 with Triton's error", async () => {
    const r = await runEngine([`--model-repository=${missing}`]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`error: creating server: Internal - failed to stat file ${missing}`);
  }, 90_000);

  it('a file where the folder should be fails it too; so does startEngine in-process', async () => {
    const file = path.join(os.tmpdir(), `repo-is-a-file-${process.pid}`);
    fs.writeFileSync(file, '');
    try {
      await expect(startTestEngine({ modelRepository: file })).rejects.toMatchObject({
        code: 'INTERNAL',
        message: `model repository '${file}' is not a directory`,
      });
      await expect(startTestEngine({ modelRepository: missing })).rejects.toMatchObject({
        code: 'INTERNAL',
        message: `failed to stat file ${missing}`,
      });
    } finally {
      fs.rmSync(file, { force: true });
    }
  });

  it('--exit-on-error=false starts without models and says why', async () => {
    const r = await runEngine([`--model-repository=${missing}`, '--exit-on-error=false'], /engine ready: 0\/0 models READY/);
    expect(r.matched).toBe(true);
    expect(r.stderr).toContain(`failed to stat file ${missing}; starting without models (--exit-on-error=false)`);
    expect(r.code).toBe(0);
  }, 90_000);
});
