// Triton's system shared-memory semantics and texts (qa/L0_shared_memory,
// server src/shared_memory_manager.cc) on the real engine over HTTP and gRPC:
// a region unregistered while a request uses it stays listed until that
// request ends, then goes; register and infer refusals word for word.
import * as grpc from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { liveMappings } from '../../native/index.ts';
import {
  createSharedMemoryRegion,
  destroySharedMemoryRegion,
  listSharedMemoryKeys,
  setSharedMemoryRegion,
  type ShmRegionHandle,
} from '../../client/shared-memory.ts';
import { grpcError, httpJson, protoLoaderClient, removeDir, startTestEngine, tempRepo, type ProtoClient } from './helpers.ts';

const PREFIX = `/l0shmtriton${process.pid}_`;
const SYS = '/v2/systemsharedmemory';
const T = 64; // DEFAULT_SHM_BYTE_SIZE of Triton's test: 16 INT32 / FP32

let repo: string;
let engine: RunningEngine;
let port: number;
let client: ProtoClient;
let baseMappings: number;
const open: ShmRegionHandle[] = [];

function region(name: string, byteSize: number): ShmRegionHandle {
  const h = createSharedMemoryRegion(name, `${PREFIX}${name}`, byteSize);
  open.push(h);
  return h;
}
const register = (name: string, key: string, byteSize: number, offset = 0) =>
  httpJson(port, 'POST', `${SYS}/region/${name}/register`, { key, offset, byte_size: byteSize });
const statusNames = async () => ((await httpJson(port, 'GET', `${SYS}/status`)).json as Array<{ name: string }>).map((r) => r.name);

/** POST a JSON text as is (numbers past 2^53 written exactly). */
async function postText(p: string, text: string): Promise<{ status: number; json: { error?: string; outputs?: unknown[] } }> {
  const r = await fetch(`http://127.0.0.1:${port}${p}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: text });
  return { status: r.status, json: JSON.parse(await r.text()) };
}

beforeAll(async () => {
  repo = tempRepo('l0-shm-triton', ['simple', 'js_echo']);
  engine = await startTestEngine({ modelRepository: repo });
  port = engine.httpPort;
  client = protoLoaderClient(engine.grpcPort);
  baseMappings = liveMappings();
});

afterEach(async () => {
  for (const h of open.splice(0)) destroySharedMemoryRegion(h);
  expect((await httpJson(port, 'POST', `${SYS}/unregister`)).status).toBe(200);
  expect(listSharedMemoryKeys(PREFIX)).toEqual([]);
  for (let i = 0; i < 50 && liveMappings() !== baseMappings; i++) await new Promise((r) => setTimeout(r, 20));
  expect(liveMappings()).toBe(baseMappings);
});

afterAll(async () => {
  client?.close();
  await engine?.stop();
  removeDir(repo);
});

/** Four regions as Triton's _configure_server makes them, inputs filled. */
async function configure(): Promise<void> {
  const names = ['input0_data', 'input1_data', 'output0_data', 'output1_data'];
  for (const n of names) {
    region(n, T);
    expect((await register(n, `${PREFIX}${n}`, T)).status).toBe(200);
  }
  setSharedMemoryRegion(open[0]!, [Float32Array.from({ length: 16 }, (_, i) => i)]);
}

/** A js_echo request (delay_ms) whose input and output live in the regions. */
function slowEchoBody(delayMs: number): object {
  return {
    parameters: { delay_ms: delayMs },
    inputs: [
      { name: 'INPUT0', datatype: 'FP32', shape: [16], parameters: { shared_memory_region: 'input0_data', shared_memory_byte_size: T } },
    ],
    outputs: [{ name: 'OUTPUT0', parameters: { shared_memory_region: 'output0_data', shared_memory_byte_size: T } }],
  };
}

describe('L0_shared_memory (Triton): unregister during inference', () => {
  it('keeps regions in use listed until the request ends, then removes them without a second unregister (HTTP)', async () => {
    await configure();
    const inflight = httpJson(port, 'POST', '/v2/models/js_echo/infer', slowEchoBody(600));
    await new Promise((r) => setTimeout(r, 200));
    expect((await httpJson(port, 'POST', `${SYS}/unregister`)).status).toBe(200);
    // The two regions the request uses stay; the two it does not use are gone at once.
    expect((await statusNames()).sort()).toEqual(['input0_data', 'output0_data']);
    const dup = await register('input0_data', `${PREFIX}input0_data`, T);
    expect(dup.json.error).toBe("shared memory region 'input0_data' already in manager");
    const r = await inflight;
    expect(r.status).toBe(200);
    expect(r.json.outputs[0]).toEqual({ name: 'OUTPUT0', datatype: 'FP32', shape: [16] });
    expect(await statusNames()).toEqual([]);
    const gone = await httpJson(port, 'GET', `${SYS}/region/input0_data/status`);
    expect([gone.status, gone.json.error]).toEqual([404, "Unable to find system shared memory region: 'input0_data'"]);
  });

  it('a second request may use a region awaiting unregister; it goes when the last one ends (gRPC unregister)', async () => {
    await configure();
    const first = httpJson(port, 'POST', '/v2/models/js_echo/infer', slowEchoBody(500));
    await new Promise((r) => setTimeout(r, 150));
    await client.call('SystemSharedMemoryUnregister', { name: 'input0_data' });
    const second = httpJson(port, 'POST', '/v2/models/js_echo/infer', slowEchoBody(900));
    expect((await first).status).toBe(200);
    expect((await statusNames()).sort()).toEqual(['input0_data', 'input1_data', 'output0_data', 'output1_data']);
    expect((await second).status).toBe(200);
    expect((await statusNames()).sort()).toEqual(['input1_data', 'output0_data', 'output1_data']);
    const st = await grpcError(client.call('SystemSharedMemoryStatus', { name: 'input0_data' }));
    expect(st.code).toBe(grpc.status.NOT_FOUND);
  });
});

describe('L0_shared_memory (Triton): texts', () => {
  it('register: past the object end, reserved key prefix, invalid key', async () => {
    region('r', T);
    for (const [size, offset] of [
      [T + 1, 0],
      [T, 1],
      [1, T],
      [0, T + 1],
    ] as const) {
      const r = await register('r', `${PREFIX}r`, size, offset);
      expect([r.status, r.json.error]).toEqual([400, "failed to register shared memory region 'r': invalid args"]);
    }
    const reserved = 'triton_python_backend_shm_region_';
    const rk = await register('my_test_shm_name', `${reserved}_my_test_shm_key`, 10000);
    expect([rk.status, rk.json.error]).toEqual([
      400,
      `cannot register shared memory region 'my_test_shm_name' with key '${reserved}_my_test_shm_key' as the key contains the reserved prefix '${reserved}'`,
    ]);
    const g = await grpcError(client.call('SystemSharedMemoryRegister', { name: 'x', key: `${reserved}k`, offset: 0, byte_size: 8 }));
    expect([g.code, g.details]).toEqual([
      grpc.status.INVALID_ARGUMENT,
      `cannot register shared memory region 'x' with key '${reserved}k' as the key contains the reserved prefix '${reserved}'`,
    ]);
    for (const key of ['/', `${PREFIX}a/b`]) {
      const r = await register('bad', key, 8);
      expect([r.status, r.json.error]).toEqual([400, `cannot register shared memory region 'bad' - invalid shm key '${key}'`]);
    }
    expect(await statusNames()).toEqual([]);
  });

  it('register: the reserved prefix after any leading slashes, checked before the name or the key syntax', async () => {
    const reserved = 'triton_python_backend_shm_region_';
    const text = (name: string, key: string) =>
      `cannot register shared memory region '${name}' with key '${key}' as the key contains the reserved prefix '${reserved}'`;
    // shm_open reads '///x' as '/x': each is the reserved object, and the syntax check would have refused the first.
    for (const key of [`///${reserved}_k`, `/${reserved}k`, `//${reserved}`]) {
      const r = await register('my_test_shm_name', key, 10000);
      expect([r.status, r.json.error]).toEqual([400, text('my_test_shm_name', key)]);
      const g = await grpcError(client.call('SystemSharedMemoryRegister', { name: 'g', key, offset: 0, byte_size: 8 }));
      expect([g.code, g.details]).toEqual([grpc.status.INVALID_ARGUMENT, text('g', key)]);
    }
    // A name already in the manager: the key's prefix is refused first, as Triton checks it before taking its lock.
    region('taken', T);
    expect((await register('taken', `${PREFIX}taken`, T)).status).toBe(200);
    const again = await register('taken', `/${reserved}x`, T);
    expect([again.status, again.json.error]).toEqual([400, text('taken', `/${reserved}x`)]);
    // A key naming no object is the client's mistake: 400 / INVALID_ARGUMENT with Triton's text, not a 500.
    const none = `${PREFIX}absent`;
    const r = await register('absent', none, T);
    expect([r.status, r.json.error]).toEqual([400, `Unable to open shared memory region: '${none}'`]);
    const g = await grpcError(client.call('SystemSharedMemoryRegister', { name: 'absent', key: none, offset: 0, byte_size: T }));
    expect([g.code, g.details]).toEqual([grpc.status.INVALID_ARGUMENT, `Unable to open shared memory region: '${none}'`]);
    expect(await statusNames()).toEqual(['taken']);
  });

  it('infer: invalid offset, offset + byte size, integer overflow over HTTP (exact uint64)', async () => {
    await configure();
    const body = (offset: string, byteSize: string) =>
      `{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"parameters":{"shared_memory_region":"input0_data","shared_memory_byte_size":64}},` +
      `{"name":"INPUT1","datatype":"INT32","shape":[1,16],"parameters":{"shared_memory_region":"input1_data","shared_memory_byte_size":64}}],` +
      `"outputs":[{"name":"OUTPUT0","parameters":{"shared_memory_region":"output0_data","shared_memory_offset":${offset},"shared_memory_byte_size":${byteSize}}}]}`;
    let r = await postText('/v2/models/simple/infer', body(String(2n ** 64n - 32n), '64'));
    expect(r.status).toBe(400);
    expect(r.json.error).toContain("Invalid offset for shared memory region: 'output0_data'");
    r = await postText('/v2/models/simple/infer', body('60', '64'));
    expect(r.status).toBe(400);
    expect(r.json.error).toContain("Invalid offset + byte size for shared memory region: 'output0_data'");
    r = await postText('/v2/models/simple/infer', body('32', String(2n ** 64n - 32n)));
    expect([r.status, r.json.error]).toEqual([
      400,
      "Integer overflow detected: byte_size (18446744073709551584) + offset (32) exceeds maximum value (18446744073709551615) for region 'output0_data'",
    ]);
    // gRPC: an offset one past the region.
    const g = await grpcError(
      client.call('ModelInfer', {
        model_name: 'simple',
        inputs: [
          {
            name: 'INPUT0',
            datatype: 'INT32',
            shape: [1, 16],
            parameters: { shared_memory_region: { string_param: 'input0_data' }, shared_memory_byte_size: { int64_param: 64 } },
          },
          {
            name: 'INPUT1',
            datatype: 'INT32',
            shape: [1, 16],
            parameters: { shared_memory_region: { string_param: 'input1_data' }, shared_memory_byte_size: { int64_param: 64 } },
          },
        ],
        outputs: [
          {
            name: 'OUTPUT0',
            parameters: {
              shared_memory_region: { string_param: 'output0_data' },
              shared_memory_offset: { int64_param: 64 },
              shared_memory_byte_size: { int64_param: 64 },
            },
          },
        ],
      }),
    );
    expect(g.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(g.details).toContain("Invalid offset for shared memory region: 'output0_data'");
  });

  it('a region that is not registered: infer NOT_FOUND (HTTP 404), unregister succeeds, status NOT_FOUND, on both protocols', async () => {
    await configure();
    const shmInput = (name: string, region: string) => ({
      name,
      datatype: 'INT32',
      shape: [1, 16],
      parameters: { shared_memory_region: region, shared_memory_byte_size: T },
    });
    // An input naming an unknown region (Triton: GetMemoryInfo, NOT_FOUND).
    let r = await httpJson(port, 'POST', '/v2/models/simple/infer', {
      inputs: [shmInput('INPUT0', 'nowhere'), shmInput('INPUT1', 'input1_data')],
    });
    expect([r.status, r.json.error]).toEqual([404, "Unable to find shared memory region: 'nowhere' (input 'INPUT0')"]);
    // An output naming one.
    r = await httpJson(port, 'POST', '/v2/models/simple/infer', {
      inputs: [shmInput('INPUT0', 'input0_data'), shmInput('INPUT1', 'input1_data')],
      outputs: [{ name: 'OUTPUT0', parameters: { shared_memory_region: 'nowhere', shared_memory_byte_size: T } }],
    });
    expect([r.status, r.json.error]).toEqual([404, "Unable to find shared memory region: 'nowhere' (output 'OUTPUT0')"]);
    const grpcInput = (name: string, region: string) => ({
      name,
      datatype: 'INT32',
      shape: [1, 16],
      parameters: { shared_memory_region: { string_param: region }, shared_memory_byte_size: { int64_param: T } },
    });
    const g = await grpcError(
      client.call('ModelInfer', { model_name: 'simple', inputs: [grpcInput('INPUT0', 'input0_data'), grpcInput('INPUT1', 'nowhere')] }),
    );
    expect([g.code, g.details]).toEqual([grpc.status.NOT_FOUND, "Unable to find shared memory region: 'nowhere' (input 'INPUT1')"]);
    // Unregistering an unknown region succeeds and changes nothing (Triton's UnregisterHelper).
    expect((await httpJson(port, 'POST', `${SYS}/region/nowhere/unregister`)).status).toBe(200);
    await client.call('SystemSharedMemoryUnregister', { name: 'nowhere' });
    expect((await statusNames()).sort()).toEqual(['input0_data', 'input1_data', 'output0_data', 'output1_data']);
    // Status of an unknown region: NOT_FOUND with Triton's text.
    const st = await httpJson(port, 'GET', `${SYS}/region/nowhere/status`);
    expect([st.status, st.json.error]).toEqual([404, "Unable to find system shared memory region: 'nowhere'"]);
    const gs = await grpcError(client.call('SystemSharedMemoryStatus', { name: 'nowhere' }));
    expect([gs.code, gs.details]).toEqual([grpc.status.NOT_FOUND, "Unable to find system shared memory region: 'nowhere'"]);
  });

  it("--allow-client-shm=false: Triton's text", async () => {
    const emptyRepo = tempRepo('l0-shm-triton-off');
    const off = await startTestEngine({ modelRepository: emptyRepo, allowClientShm: false });
    try {
      const r = await httpJson(off.httpPort, 'POST', `${SYS}/region/in/register`, { key: `${PREFIX}in`, offset: 0, byte_size: T });
      expect(r.json.error).toBe("Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable.");
    } finally {
      await off.stop();
      removeDir(emptyRepo);
    }
  });
});
