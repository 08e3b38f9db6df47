// The engine as its own process (npm run engine): SIGTERM finalizes every
// python stub and removes its shm objects before exit 0; an engine killed
// with SIGKILL leaves stubs that exit on their own (EOF on the channel), and
// the next engine removes the shm objects the dead one left.
import { describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { f32Bytes, freePort, protoLoaderClient, removeDir, ROOT, startTestEngine, toF32 } from './helpers.ts';
import { processAlive, pythonRepo } from './python-support.ts';

/** Children of `pid` running stub.py. */
function stubChildren(pid: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const ppid = Number(readFileSync(`/proc/${name}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
      if (ppid === pid && readFileSync(`/proc/${name}/cmdline`, 'utf8').includes('stub.py')) out.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}
// Echoes a float vector: 1000 floats travel through the shm arena, not inline.
const ECHO = {
  config: `name: "echo"
backend: "python"
input [ { name: "X", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "Y", data_type: TYPE_FP32, dims: [ -1 ] } ]
`,
  model: `import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy() * 2)]) for r in requests]
`,
};
const shmOf = (pid: number) => readdirSync('/dev/shm').filter((n) => n.startsWith(`tpy.${pid}.`));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function startEngineProcess(repo: string): Promise<{ child: ChildProcess; grpcPort: number; exited: Promise<number | null> }> {
  const [grpcPort, httpPort] = [await freePort(), await freePort()];
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'engine/main.ts',
      `--model-repository=${repo}`,
      `--grpc-port=${grpcPort}`,
      `--http-port=${httpPort}`,
      '--allow-metrics=false',
      '--http-address=127.0.0.1',
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let logs = '';
  child.stdout!.on('data', (d) => (logs += d));
  child.stderr!.on('data', (d) => (logs += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  for (const deadline = Date.now() + 60_000; ; ) {
    if (
      await fetch(`http://127.0.0.1:${httpPort}/v2/health/ready`).then(
        (r) => r.status === 200,
        () => false,
      )
    )
      break;
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`engine did not become ready:\n${logs}`);
    await sleep(200);
  }
  return { child, grpcPort, exited };
}

/** One echo request of 1000 floats; returns the sum of the answer. */
async function echoOnce(port: number): Promise<number> {
  const c = protoLoaderClient(port);
  try {
    const x = Array.from({ length: 1000 }, (_, i) => i);
    const res = await c.call('ModelInfer', {
      model_name: 'echo',
      inputs: [{ name: 'X', datatype: 'FP32', shape: [1000] }],
      raw_input_contents: [f32Bytes(x)],
    });
    return toF32(res.raw_output_contents[0]).reduce((s, v) => s + v, 0);
  } finally {
    c.close();
  }
}

describe('L0_python_lifecycle', () => {
  it('SIGTERM: stubs finalize and exit, no shm object remains, the engine exits 0', async () => {
    const repo = pythonRepo('l0-py-sigterm', [], { echo: ECHO });
    const { child, grpcPort, exited } = await startEngineProcess(repo);
    try {
      expect(await echoOnce(grpcPort)).toBe(999_000);
      const stubs = stubChildren(child.pid!);
      expect(stubs).toHaveLength(1);
      expect(shmOf(child.pid!).length).toBeGreaterThan(0);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(stubs.some(processAlive)).toBe(false);
      expect(shmOf(child.pid!)).toEqual([]);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      removeDir(repo);
    }
  }, 90_000);

  it('SIGKILL of the engine: its stubs exit by themselves; the next engine sweeps its shm objects', async () => {
    const repo = pythonRepo('l0-py-sigkill', [], { echo: ECHO });
    const { child, grpcPort, exited } = await startEngineProcess(repo);
    try {
      expect(await echoOnce(grpcPort)).toBe(999_000);
      const stubs = stubChildren(child.pid!);
      expect(stubs).toHaveLength(1);
      child.kill('SIGKILL');
      await exited;
      for (const until = Date.now() + 10_000; stubs.some(processAlive) && Date.now() < until; ) await sleep(50);
      expect(stubs.some(processAlive)).toBe(false);
      // The killed engine's input arena is still there; loading a python model in another engine removes it.
      expect(shmOf(child.pid!).length).toBeGreaterThan(0);
      const eng = await startTestEngine({ modelRepository: repo });
      await eng.stop();
      expect(shmOf(child.pid!)).toEqual([]);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      removeDir(repo);
    }
  }, 90_000);
});
