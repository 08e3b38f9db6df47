// Triton's client shared memory switch (qa/L0_shared_memory
// test_client_shm_disabled_by_default; docs/protocol/extension_shared_memory.md:
// "Client registration/unregistration and use of shared-memory regions
// require the server to be started with --allow-client-shm=true"): with it
// off, registering AND unregistering are refused with Triton's text on both
// protocols, for system and CUDA regions, and nothing changes; status still
// answers.
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { createSharedMemoryRegion, destroySharedMemoryRegion, listSharedMemoryKeys } from '../../client/shared-memory.ts';
import { grpcError, httpJson, protoLoaderClient, removeDir, startTestEngine, tempRepo, type ProtoClient } from './helpers.ts';

const DISABLED = "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable.";
const PREFIX = `/l0shmoff${process.pid}_`;
const SYS = '/v2/systemsharedmemory';
const CUDA = '/v2/cudasharedmemory';

let repo: string;
let engine: RunningEngine;
let client: ProtoClient;

beforeAll(async () => {
  repo = tempRepo('l0-shm-disabled', ['simple']);
  engine = await startTestEngine({ modelRepository: repo, allowClientShm: false });
  client = protoLoaderClient(engine.grpcPort);
});

afterAll(async () => {
  client?.close();
  await engine?.stop();
  removeDir(repo);
  expect(listSharedMemoryKeys(PREFIX)).toEqual([]);
});

describe('L0_shared_memory_disabled', () => {
  it("HTTP: register, unregister by name and unregister all are refused with Triton's text; status answers", async () => {
    const h = createSharedMemoryRegion('dummy_data', `${PREFIX}dummy_data`, 8);
    try {
      const p = engine.httpPort;
      const reg = await httpJson(p, 'POST', `${SYS}/region/dummy_data/register`, { key: `${PREFIX}dummy_data`, offset: 0, byte_size: 8 });
      expect([reg.status, reg.json.error]).toEqual([501, DISABLED]);
      for (const path of [
        `${SYS}/region/dummy_data/unregister`,
        `${SYS}/unregister`,
        `${CUDA}/region/dummy_data/unregister`,
        `${CUDA}/unregister`,
      ]) {
        const r = await httpJson(p, 'POST', path);
        expect([path, r.status, r.json.error]).toEqual([path, 501, DISABLED]);
      }
      const cuda = await httpJson(p, 'POST', `${CUDA}/region/g/register`, { raw_handle: { b64: 'AAAA' }, device_id: 0, byte_size: 8 });
      expect([cuda.status, cuda.json.error]).toEqual([501, DISABLED]);
      expect((await httpJson(p, 'GET', `${SYS}/status`)).json).toEqual([]);
    } finally {
      destroySharedMemoryRegion(h);
    }
  });

  it("gRPC: the same four refusals are UNIMPLEMENTED with Triton's text; status answers", async () => {
    const calls: Array<[string, object]> = [
      ['SystemSharedMemoryRegister', { name: 'dummy_data', key: `${PREFIX}dummy_data`, offset: 0, byte_size: 8 }],
      ['SystemSharedMemoryUnregister', { name: 'dummy_data' }],
      ['SystemSharedMemoryUnregister', { name: '' }],
      ['CudaSharedMemoryRegister', { name: 'g', raw_handle: Buffer.alloc(4), device_id: 0, byte_size: 8 }],
      ['CudaSharedMemoryUnregister', { name: '' }],
    ];
    for (const [method, req] of calls) {
      const e = await grpcError(client.call(method, req));
      expect([method, e.code, e.details]).toEqual([method, grpc.status.UNIMPLEMENTED, DISABLED]);
    }
    expect((await client.call('SystemSharedMemoryStatus', { name: '' })).regions).toEqual({});
  });
});
