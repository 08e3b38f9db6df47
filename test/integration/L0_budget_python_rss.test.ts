// Python stubs are charged what they hold (their VmRSS), not nothing: a model
// whose stub allocates 200 MB at initialize is charged at least that, the
// charge follows the stub when it allocates 150 MB more in execute, and
// when that puts the books over the budget the idle neighbour is evicted.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stopAll } from '../bench/processes.ts';
import { repoIndex, sleep, spawnEngine, type EngineProc } from '../bench/sharing-support.ts';
import { removeDir } from './helpers.ts';
import { pythonRepo } from './python-support.ts';

const MiB = 2 ** 20;
const model = (name: string, initMiB: number, growMiB: number) => ({
  config: `name: "${name}"
backend: "python"
input [ { name: "X", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "Y", data_type: TYPE_FP32, dims: [ -1 ] } ]
`,
  model: `import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.hold = [bytearray(b"x" * (${initMiB} * 1024 * 1024))]

    def execute(self, requests):
        if len(self.hold) == 1:
            self.hold.append(bytearray(b"y" * (${growMiB} * 1024 * 1024)))
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())]) for r in requests]
`,
});

let repo: string;
let engine: EngineProc;

beforeAll(async () => {
  repo = pythonRepo('l0-budget-py', [], { big: model('big', 200, 150), small: model('small', 60, 0) });
  // Its own process: the charges are read against the engine's RSS alone.
  engine = await spawnEngine(repo, [`--model-memory-budget=${430 * MiB}`]);
}, 120_000);

afterAll(async () => {
  await stopAll();
  removeDir(repo);
});

async function infer(m: string): Promise<void> {
  const r = await fetch(`http://127.0.0.1:${engine.http}/v2/models/${m}/infer`, {
    method: 'POST',
    body: JSON.stringify({ inputs: [{ name: 'X', datatype: 'FP32', shape: [2], data: [1, 2] }] }),
  });
  if (!r.ok) throw new Error(`${m}: HTTP ${r.status} ${await r.text()}`);
}
const entry = async (m: string) => (await repoIndex(engine.http)).find((x) => x.name === m)!;
const charged = async (m: string) => (await entry(m)).resident_bytes ?? 0;

describe('memory budget: Python stubs by their RSS', () => {
  it('charges the stub what it holds, follows it as it grows, and evicts an idle neighbour when over', async () => {
    await infer('small');
    const small0 = await charged('small');
    expect(small0).toBeGreaterThanOrEqual(60 * MiB);
    expect(small0).toBeLessThan(150 * MiB);
    await infer('big');
    // Loaded with 200 MB in its stub; the first execute adds 150 MB: the monitor follows the stub.
    let big = 0;
    for (let i = 0; i < 50 && (big = await charged('big')) < 350 * MiB; i++) await sleep(100);
    expect(big).toBeGreaterThanOrEqual(350 * MiB);
    expect((await entry('big')).load_bytes!).toBeGreaterThanOrEqual(200 * MiB);
    // big (350+) and small (60+) are over 430 together: the idle 'small' went, big (alone under the budget) stays.
    // The index says UNAVAILABLE as the unload starts; the eviction is counted once the stub is gone: wait for both.
    let small = await entry('small');
    for (let i = 0; i < 100 && (small.state === 'READY' || !small.evicted); i++) {
      await sleep(100);
      small = await entry('small');
    }
    expect(small.state).toBe('UNAVAILABLE');
    expect(small.evicted, JSON.stringify(await repoIndex(engine.http))).toBe(1);
    expect((await entry('big')).state).toBe('READY');
  }, 120_000);
});
