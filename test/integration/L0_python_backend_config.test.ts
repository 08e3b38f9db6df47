// Triton's python backend settings and shared memory, on real stubs:
// --backend-config=python,shm-default-byte-size sizes each instance's input
// arena from the start; python,stub-timeout-seconds bounds how long a new stub
// may take to come up (Triton's words when it does not); a BYTES input in a
// client's system shm region reaches the model intact, small or past the
// arena's size (it used to be left out of the arena's sizing).
import { chmodSync, mkdtempSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { parseEngineArgs } from '../../engine/server/cli-options.ts';
import { createSharedMemoryRegion, destroySharedMemoryRegion, setSharedMemoryRegion } from '../../client/shared-memory.ts';
import { encodeBytesTensor, httpJson, removeDir, startTestEngine } from './helpers.ts';
import { pythonRepo, pythonShmEntries } from './python-support.ts';

const BYTES_LEN_CONFIG = `name: "bytes_len"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0", data_type: TYPE_STRING, dims: [ -1 ] } ]
output [ { name: "LENS", data_type: TYPE_INT64, dims: [ -1 ] }, { name: "EDGES", data_type: TYPE_STRING, dims: [ -1 ] } ]
`;
/** LENS: each element's length; EDGES: each element's first and last 4 bytes. */
const BYTES_LEN_MODEL = `import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy().reshape(-1)
            lens = np.array([len(v) for v in x], dtype=np.int64)
            edges = np.array([v[:4] + v[-4:] for v in x], dtype=np.object_)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("LENS", lens), pb_utils.Tensor("EDGES", edges)]))
        return out
`;

const engines: RunningEngine[] = [];
const dirs: string[] = [];
afterAll(async () => {
  for (const e of engines) await e.stop();
  for (const d of dirs) removeDir(d);
});

async function start(flags: string[]): Promise<RunningEngine> {
  const repo = pythonRepo('l0-py-config', [], { bytes_len: { config: BYTES_LEN_CONFIG, model: BYTES_LEN_MODEL } });
  dirs.push(repo);
  const opts = parseEngineArgs([`--model-repository=${repo}`, ...flags]);
  const e = await startTestEngine({ modelRepository: repo, backendConfig: opts.backendConfig });
  engines.push(e);
  return e;
}
const state = (e: RunningEngine) => e.server.repositoryIndex(false).find((m) => m.name === 'bytes_len')!;
/** This process's python input arenas in /dev/shm and their sizes. */
const arenas = () =>
  readdirSync('/dev/shm')
    .filter((n) => n.startsWith(`tpy.${process.pid}.`) && n.endsWith('-in') && n.includes('bytes_len'))
    .map((n) => statSync(`/dev/shm/${n}`).size);

describe('L0_python_backend_config', () => {
  it('BYTES inputs in system shm: 3 elements of 700 bytes and one of 3 MiB (past the 1 MiB arena) arrive intact', async () => {
    const e = await start([]);
    expect(state(e).state).toBe('READY');
    const cases = [
      Array.from({ length: 3 }, (_, i) => Buffer.alloc(700, 97 + i)),
      [Buffer.concat([Buffer.from('head'), Buffer.alloc(3 << 20, 120), Buffer.from('tail')])],
    ];
    for (const [n, elements] of cases.entries()) {
      const tensor = encodeBytesTensor(elements);
      const key = `/l0pycfg${process.pid}_${n}`;
      const h = createSharedMemoryRegion(`in${n}`, key, tensor.length);
      try {
        setSharedMemoryRegion(h, [tensor]);
        expect(
          (
            await httpJson(e.httpPort, 'POST', `/v2/systemsharedmemory/region/in${n}/register`, {
              key,
              offset: 0,
              byte_size: tensor.length,
            })
          ).status,
        ).toBe(200);
        const r = await httpJson(e.httpPort, 'POST', '/v2/models/bytes_len/infer', {
          inputs: [
            {
              name: 'INPUT0',
              datatype: 'BYTES',
              shape: [elements.length],
              parameters: { shared_memory_region: `in${n}`, shared_memory_byte_size: tensor.length },
            },
          ],
          outputs: [
            { name: 'LENS', parameters: { binary_data: false } },
            { name: 'EDGES', parameters: { binary_data: false } },
          ],
        });
        expect(r.status, JSON.stringify(r.json)).toBe(200);
        expect(r.json.outputs[0].data).toEqual(elements.map((x) => x.length));
        expect(r.json.outputs[1].data).toEqual(elements.map((x) => `${x.subarray(0, 4)}${x.subarray(-4)}`));
      } finally {
        await httpJson(e.httpPort, 'POST', `/v2/systemsharedmemory/region/in${n}/unregister`);
        destroySharedMemoryRegion(h);
      }
    }
  }, 60_000);

  it('shm-default-byte-size: the arena is that size from the load on; below 1 MiB is refused', async () => {
    const e = await start(['--backend-config=python,shm-default-byte-size=4194304']);
    expect(state(e).state).toBe('READY');
    expect(arenas()).toContain(4194304);
    const bad = await start(['--backend-config=python,shm-default-byte-size=4096']);
    expect(state(bad).state).toBe('UNAVAILABLE');
    expect(state(bad).reason).toContain("shm-default-byte-size must be a whole number of bytes, at least 1 MiB (1048576), got '4096'");
  }, 60_000);

  it("stub-timeout-seconds: a stub slower to come up fails with Triton's words; a longer timeout lets it load", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), `l0-py-slow-${process.pid}-`));
    dirs.push(dir);
    const slow = path.join(dir, 'slow-python3');
    writeFileSync(slow, '#!/bin/sh\nsleep 3\nexec python3 "$@"\n');
    chmodSync(slow, 0o755);
    const late = await start([`--backend-config=python,python-executable=${slow}`, '--backend-config=python,stub-timeout-seconds=1']);
    expect(state(late).state).toBe('UNAVAILABLE');
    expect(state(late).reason).toContain(
      'Timed out occurred while waiting for the stub process. Failed to initialize model instance bytes_len_0',
    );
    const patient = await start([`--backend-config=python,python-executable=${slow}`, '--backend-config=python,stub-timeout-seconds=20']);
    expect(state(patient).state).toBe('READY');
  }, 60_000);

  it('leaves nothing in /dev/shm once the engines stop (arenas made at load included)', async () => {
    for (const e of engines.splice(0)) await e.stop();
    expect(pythonShmEntries()).toEqual([]);
  });
});
