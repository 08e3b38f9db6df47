// System shared memory over HTTP/REST (/v2/systemsharedmemory/...) on the real
// engine: register/status/unregister with Triton's body shapes and status
// codes, an infer whose inputs and outputs live in client regions, Triton's
// parameter errors, key-prefix confinement, region limits, and
// --allow-client-shm=false refusing registration (HTTP and gRPC).
import * as grpc from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { liveMappings } from '../../native/index.ts';
import {
  createSharedMemoryRegion,
  destroySharedMemoryRegion,
  getContents,
  listSharedMemoryKeys,
  setSharedMemoryRegion,
  type ShmRegionHandle,
} from '../../client/shared-memory.ts';
import { grpcError, httpJson, protoLoaderClient, removeDir, startTestEngine, tempRepo } from './helpers.ts';

const PREFIX = `/l0shmhttp${process.pid}_`;
const SYS = '/v2/systemsharedmemory';
const T = 16 * 4; // one INT32 [1,16] tensor of `simple`

let repo: string;
let engine: RunningEngine;
let port: number;
let baseMappings: number;
const open: ShmRegionHandle[] = [];

function region(name: string, byteSize: number): ShmRegionHandle {
  const h = createSharedMemoryRegion(name, `${PREFIX}${name}`, byteSize);
  open.push(h);
  return h;
}

const register = (name: string, key: string, byteSize: number, offset = 0) =>
  httpJson(port, 'POST', `${SYS}/region/${name}/register`, { key, offset, byte_size: byteSize });

beforeAll(async () => {
  repo = tempRepo('l0-shm-http', ['simple']);
  engine = await startTestEngine({ modelRepository: repo, shmKeyPrefix: PREFIX, shmMaxRegions: 3, shmMaxBytes: 1 << 20 });
  port = engine.httpPort;
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
  await engine?.stop();
  removeDir(repo);
});

describe('L0_shared_memory_http: register, status, unregister', () => {
  it('registers, lists one and all, refuses duplicates and oversize, unregisters', async () => {
    region('in', 2 * T);
    region('out', T);
    expect((await register('in', `${PREFIX}in`, 2 * T)).status).toBe(200);
    expect((await register('out', `${PREFIX}out`, T)).status).toBe(200);

    const all = await httpJson(port, 'GET', `${SYS}/status`);
    expect(all.status).toBe(200);
    expect(all.json).toEqual([
      { name: 'in', key: `${PREFIX}in`, offset: 0, byte_size: 2 * T },
      { name: 'out', key: `${PREFIX}out`, offset: 0, byte_size: T },
    ]);
    const one = await httpJson(port, 'GET', `${SYS}/region/out/status`);
    expect([one.status, one.json]).toEqual([200, [{ name: 'out', key: `${PREFIX}out`, offset: 0, byte_size: T }]]);
    const missing = await httpJson(port, 'GET', `${SYS}/region/nope/status`);
    expect(missing.status).toBe(404);
    expect(missing.json.error).toContain("'nope'");

    const dup = await register('in', `${PREFIX}in`, T);
    expect(dup.status).toBe(400); // ALREADY_EXISTS: Triton's HttpCodeFromError answers 400
    expect(dup.json.error).toContain("'in'");
    const over = await register('over', `${PREFIX}in`, 2 * T, 8);
    expect(over.status).toBe(400);
    expect(over.json.error).toBe("failed to register shared memory region 'over': invalid args");
    const noSize = await httpJson(port, 'POST', `${SYS}/region/x/register`, { key: `${PREFIX}in` });
    expect(noSize.status).toBe(400);

    expect((await httpJson(port, 'POST', `${SYS}/region/out/unregister`)).status).toBe(200);
    expect((await httpJson(port, 'GET', `${SYS}/status`)).json.map((r: { name: string }) => r.name)).toEqual(['in']);
    expect((await httpJson(port, 'POST', `${SYS}/region/never_registered/unregister`)).status).toBe(200);
    expect((await httpJson(port, 'POST', `${SYS}/unregister`)).status).toBe(200);
    expect((await httpJson(port, 'GET', `${SYS}/status`)).json).toEqual([]);
  });

  it('confines keys to --shm-key-prefix and rejects path tricks', async () => {
    const outside = await register('o', `/l0shmhttp_other_${process.pid}`, T);
    expect(outside.status).toBe(400);
    expect(outside.json.error).toContain(`allowed prefix '${PREFIX}'`);
    for (const key of [`${PREFIX}../../etc/passwd`, `${PREFIX}a/b`, `${PREFIX}..`]) {
      const r = await register('trick', key, T);
      expect(r.status).toBe(400);
      expect(r.json.error).toBe(`cannot register shared memory region 'trick' - invalid shm key '${key}'`);
    }
    expect((await httpJson(port, 'GET', `${SYS}/status`)).json).toEqual([]);
  });

  it('enforces the region count and total byte limits', async () => {
    for (const n of ['l1', 'l2', 'l3']) {
      region(n, T);
      expect((await register(n, `${PREFIX}${n}`, T)).status).toBe(200);
    }
    region('l4', T);
    const r = await register('l4', `${PREFIX}l4`, T);
    expect(r.status).toBe(503);
    expect(r.json.error).toContain('limit of 3 regions');
    await httpJson(port, 'POST', `${SYS}/unregister`);
    region('huge', (1 << 20) + 4096);
    const big = await register('huge', `${PREFIX}huge`, (1 << 20) + 4096);
    expect(big.status).toBe(400);
    expect(big.json.error).toContain('exceeds the limit');
  });
});

describe('L0_shared_memory_http: infer with shm parameters', () => {
  const input = (name: string, region: string, offset: number) => ({
    name,
    datatype: 'INT32',
    shape: [1, 16],
    parameters: { shared_memory_region: region, shared_memory_offset: offset, shared_memory_byte_size: T },
  });

  it('reads inputs from a region and writes an output into another; the response carries no data for it', async () => {
    const a = Int32Array.from({ length: 16 }, (_, i) => i * 3);
    const b = Int32Array.from({ length: 16 }, (_, i) => 100 - i);
    const ip = region('in', 2 * T);
    const op = region('out', 4096);
    setSharedMemoryRegion(ip, [a, b]);
    expect((await register('in', `${PREFIX}in`, 2 * T)).status).toBe(200);
    expect((await register('out', `${PREFIX}out`, 4096)).status).toBe(200);

    const r = await httpJson(port, 'POST', '/v2/models/simple/infer', {
      inputs: [input('INPUT0', 'in', 0), input('INPUT1', 'in', T)],
      outputs: [
        { name: 'OUTPUT0', parameters: { shared_memory_region: 'out', shared_memory_offset: 128, shared_memory_byte_size: T } },
        { name: 'OUTPUT1', parameters: { binary_data: false } },
      ],
    });
    expect(r.status).toBe(200);
    const [o0, o1] = r.json.outputs;
    expect(o0).toEqual({
      name: 'OUTPUT0',
      datatype: 'INT32',
      shape: [1, 16],
    }); // as Triton writes an output in shm: no parameters (its C++ client reads them as binary_data_size)
    expect(Array.from(getContents(op, 'INT32', [16], 128) as Int32Array)).toEqual(Array.from(a, (x, i) => x + b[i]!));
    expect(o1.data).toEqual(Array.from(a, (x, i) => x - b[i]!));
  });

  it('answers Triton parameter errors with 400 naming the tensor', async () => {
    const ip = region('in', 2 * T);
    region('out', 32);
    setSharedMemoryRegion(ip, [new Int32Array(32)]);
    expect((await register('in', `${PREFIX}in`, 2 * T)).status).toBe(200);
    expect((await register('out', `${PREFIX}out`, 32)).status).toBe(200);
    const infer = (inputs: object[], outputs?: object[]) =>
      httpJson(port, 'POST', '/v2/models/simple/infer', { inputs, ...(outputs ? { outputs } : {}) });
    const ok = [input('INPUT0', 'in', 0), input('INPUT1', 'in', T)];

    let r = await infer(ok, [{ name: 'OUTPUT0', parameters: { shared_memory_region: 'out', shared_memory_byte_size: 32 } }]);
    expect([r.status, r.json.error]).toEqual([400, expect.stringContaining(`output 'OUTPUT0' should be at least ${T} bytes`)]);
    r = await infer([input('INPUT0', 'in', T + 4), ok[1]!]);
    expect([r.status, r.json.error]).toEqual([400, "Invalid offset + byte size for shared memory region: 'in' (input 'INPUT0')"]);
    r = await infer([{ ...ok[0]!, parameters: { shared_memory_offset: 0, shared_memory_byte_size: T } }, ok[1]!]);
    expect([r.status, r.json.error]).toEqual([400, expect.stringContaining("only be given with 'shared_memory_region'")]);
    r = await infer([{ ...ok[0]!, parameters: { shared_memory_region: 'in' } }, ok[1]!]);
    expect([r.status, r.json.error]).toEqual([400, expect.stringContaining("'shared_memory_byte_size' must be given")]);
    r = await infer([{ ...ok[0]!, data: Array(16).fill(0) }, ok[1]!]);
    expect([r.status, r.json.error]).toEqual([400, expect.stringContaining('also carries data')]);
  });
});

describe('L0_shared_memory_http: --allow-client-shm=false', () => {
  it('refuses registration over HTTP and gRPC and lists nothing', async () => {
    const emptyRepo = tempRepo('l0-shm-off');
    const off = await startTestEngine({ modelRepository: emptyRepo, allowClientShm: false });
    const client = protoLoaderClient(off.grpcPort);
    try {
      region('in', T);
      const r = await httpJson(off.httpPort, 'POST', `${SYS}/region/in/register`, { key: `${PREFIX}in`, offset: 0, byte_size: T });
      expect(r.status).toBe(501);
      expect(r.json.error).toContain('--allow-client-shm');
      const e = await grpcError(client.call('SystemSharedMemoryRegister', { name: 'in', key: `${PREFIX}in`, offset: 0, byte_size: T }));
      expect(e.code).toBe(grpc.status.UNIMPLEMENTED);
      expect(e.details).toContain('--allow-client-shm');
      expect((await httpJson(off.httpPort, 'GET', `${SYS}/status`)).json).toEqual([]);
      expect((await client.call('SystemSharedMemoryStatus', { name: '' })).regions).toEqual({});
    } finally {
      client.close();
      await off.stop();
      removeDir(emptyRepo);
    }
  });
});
