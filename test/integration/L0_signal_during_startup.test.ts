// SIGTERM while the engine is still loading its models (a pod deleted during
// start-up, issue 27): the engine finishes loading, stops its Python stubs and
// exits 0, instead of dying on the default signal action and orphaning them.
// The gateway, signalled before its engine is reachable, exits 0 too. The two
// cases (each its own child process) run at the same time.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { describe, it } from 'vitest';
import { ROOT } from './helpers.ts';
import { processAlive, pythonRepo } from './python-support.ts';
import { freePort } from './L0_gateway-support.ts';

const SLOW_MODEL = `
import time
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        time.sleep(1.5)

    def execute(self, requests):
        return [pb_utils.InferenceResponse(output_tensors=[]) for _ in requests]
`;
const SLOW_CONFIG = `name: "slow_init"\nbackend: "python"\nmax_batch_size: 0\ninput [{ name: "IN" data_type: TYPE_FP32 dims: [1] }]\noutput [{ name: "OUT" data_type: TYPE_FP32 dims: [1] }]\n`;

/** Python stub processes whose parent is `pid`. */
function stubChildren(pid: number): number[] {
  const out: number[] = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      if (
        Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid &&
        fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').includes('stub.py')
      )
        out.push(Number(d));
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

/** Start `argv` under node, send SIGTERM when `when` matches its stderr, resolve with its exit. */
function signalWhen(
  argv: string[],
  when: RegExp,
  onSignal?: (pid: number) => void,
): Promise<{ code: number | null; signal: string | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, argv, {
      cwd: ROOT,
      env: { ...process.env, ENGINE_QUIET: '0', REDIS_URL: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    let sent = false;
    const timer = setTimeout(() => {
      p.kill('SIGKILL');
      reject(new Error(`no exit within 60 s:\n${stderr}`));
    }, 60_000);
    const watch = (d: Buffer) => {
      stderr += d.toString();
      if (!sent && when.test(stderr)) {
        sent = true;
        onSignal?.(p.pid!);
        p.kill('SIGTERM');
      }
    };
    p.stderr!.on('data', watch);
    p.stdout!.on('data', watch);
    p.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stderr });
    });
  });
}

describe('L0_signal_during_startup', () => {
  it.concurrent('the engine signalled while a model loads stops its stubs and exits 0', async ({ expect }) => {
    const repo = pythonRepo('sigstart', [], { slow_init: { config: SLOW_CONFIG, model: SLOW_MODEL } });
    let stubs: number[] = [];
    const r = await signalWhen(
      [
        '--import',
        'tsx',
        'engine/main.ts',
        `--model-repository=${repo}`,
        '--grpc-port=0',
        '--http-port=0',
        '--metrics-port=0',
        '--http-address=127.0.0.1',
      ],
      /started GRPCInferenceService/,
      (pid) => {
        // The stub is being started (its initialize sleeps): wait for it, then signal.
        // Keep the scan that found it: a second scan can land inside the stub's exec (a pyenv shim execs python), when
        // its /proc cmdline reads empty for a moment.
        const t0 = Date.now();
        while ((stubs = stubChildren(pid)).length === 0 && Date.now() - t0 < 10_000)
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
      },
    );
    expect(r.stderr).toContain('SIGTERM during start-up');
    expect({ code: r.code, signal: r.signal }).toEqual({ code: 0, signal: null });
    expect(stubs.length).toBeGreaterThan(0);
    for (const s of stubs) expect(processAlive(s)).toBe(false);
    fs.rmSync(repo, { recursive: true, force: true });
  }, 90_000);

  it.concurrent('the gateway signalled before its engine answers exits 0', async ({ expect }) => {
    const port = await freePort();
    const dead = await freePort();
    const r = await signalWhen(
      [
        '--import',
        'tsx',
        'gateway/main.ts',
        `--port=${port}`,
        '--host=127.0.0.1',
        `--engine=127.0.0.1:${dead}`,
        '--functions=functions',
        '--arena-regions=0',
      ],
      /not ready yet|gateway listening|listening/,
    );
    expect({ code: r.code, signal: r.signal }).toEqual({ code: 0, signal: null });
  }, 90_000);
});
