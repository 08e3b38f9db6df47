// CUDA shared-memory RPCs on a host without CUDA (this CI): register answers
// UNSUPPORTED (gRPC UNIMPLEMENTED, HTTP 501) with a message that says why,
// status lists none, unregister of an unknown name (or all) succeeds.
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { grpcError, httpJson, protoLoaderClient, removeDir, startTestEngine, tempRepo, type ProtoClient } from './helpers.ts';

const CUDA = '/v2/cudasharedmemory';
// A cudaIpcMemHandle_t is 64 opaque bytes.
const HANDLE = Buffer.alloc(64, 7);

let repo: string;
let engine: RunningEngine;
let client: ProtoClient;

beforeAll(async () => {
  repo = tempRepo('l0-cuda-shm');
  engine = await startTestEngine({ modelRepository: repo });
  client = protoLoaderClient(engine.grpcPort);
});

afterAll(async () => {
  client?.close();
  await engine?.stop();
  removeDir(repo);
});

describe('L0_cuda_shared_memory: no CUDA on this host', () => {
  it('gRPC: register is UNIMPLEMENTED with a clear message; status empty; unregister succeeds', async () => {
    const e = await grpcError(
      client.call('CudaSharedMemoryRegister', { name: 'gpu_in', raw_handle: HANDLE, device_id: 0, byte_size: 1024 }),
    );
    expect(e.code).toBe(grpc.status.UNIMPLEMENTED);
    expect(e.details).toContain("'gpu_in'");
    expect(e.details).toMatch(/without CUDA/i);
    expect((await client.call('CudaSharedMemoryStatus', { name: '' })).regions).toEqual({});
    const nf = await grpcError(client.call('CudaSharedMemoryStatus', { name: 'gpu_in' }));
    expect(nf.code).toBe(grpc.status.NOT_FOUND);
    expect(await client.call('CudaSharedMemoryUnregister', { name: 'gpu_in' })).toEqual({});
    expect(await client.call('CudaSharedMemoryUnregister', { name: '' })).toEqual({});
  });

  it('HTTP: register is 501 with a clear message; status empty; unregister succeeds', async () => {
    const r = await httpJson(engine.httpPort, 'POST', `${CUDA}/region/gpu_in/register`, {
      raw_handle: { b64: HANDLE.toString('base64') },
      device_id: 0,
      byte_size: 1024,
    });
    expect(r.status).toBe(501);
    expect(r.json.error).toContain("'gpu_in'");
    expect(r.json.error).toMatch(/without CUDA/i);
    const bad = await httpJson(engine.httpPort, 'POST', `${CUDA}/region/gpu_in/register`, { device_id: 0, byte_size: 1024 });
    expect(bad.status).toBe(400);
    expect((await httpJson(engine.httpPort, 'GET', `${CUDA}/status`)).json).toEqual([]);
    expect((await httpJson(engine.httpPort, 'GET', `${CUDA}/region/gpu_in/status`)).status).toBe(404);
    expect((await httpJson(engine.httpPort, 'POST', `${CUDA}/region/gpu_in/unregister`)).status).toBe(200);
    expect((await httpJson(engine.httpPort, 'POST', `${CUDA}/unregister`)).status).toBe(200);
  });

  it('does not list cuda regions among system ones, nor the reverse', async () => {
    expect((await client.call('SystemSharedMemoryStatus', { name: '' })).regions).toEqual({});
    const meta = await client.call('ServerMetadata', {});
    expect(meta.extensions).toEqual(expect.arrayContaining(['system_shared_memory', 'cuda_shared_memory']));
  });
});
