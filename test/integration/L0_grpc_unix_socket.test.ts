// The engine's extra gRPC listener on a Unix socket (--grpc-unix-socket), the
// path a colocated gateway uses (`npm start` wires it): the same service as
// on TCP, and the socket file is gone after a clean stop.
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TritonGrpcClient } from '../../client/grpc-client.ts';
import type { RunningEngine } from '../../engine/server/server.ts';
import { i32Bytes, removeDir, startTestEngine, tempRepo, toI32 } from './helpers.ts';

const SOCK = path.join(os.tmpdir(), `l0-grpc-unix-${process.pid}.sock`);
let repo: string;
let engine: RunningEngine | undefined;

beforeAll(async () => {
  repo = tempRepo('l0-unix', ['simple']);
  engine = await startTestEngine({ modelRepository: repo, grpcUnixSocket: SOCK });
}, 60_000);

afterAll(async () => {
  await engine?.stop();
  removeDir(repo);
});

describe('L0_grpc_unix_socket: gRPC on a Unix socket beside TCP', () => {
  it('answers ModelInfer over unix: exactly as over TCP', async () => {
    const unix = new TritonGrpcClient(`unix:${SOCK}`);
    const tcp = new TritonGrpcClient(`127.0.0.1:${engine!.grpcPort}`);
    try {
      expect((await unix.serverReady()).ready).toBe(true);
      const req = {
        model_name: 'simple',
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 16] },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
        ],
        raw_input_contents: [i32Bytes(Array.from({ length: 16 }, (_, i) => i)), i32Bytes(Array(16).fill(3))],
      };
      const [a, b] = await Promise.all([unix.modelInfer(req), tcp.modelInfer(req)]);
      expect([...toI32(a.raw_output_contents[0]!)]).toEqual(Array.from({ length: 16 }, (_, i) => i + 3));
      expect(a.raw_output_contents.map((x) => [...x])).toEqual(b.raw_output_contents.map((x) => [...x]));
    } finally {
      unix.close();
      tcp.close();
    }
  });

  it('removes the socket file when the engine stops', async () => {
    expect(existsSync(SOCK)).toBe(true);
    await engine!.stop();
    engine = undefined;
    expect(existsSync(SOCK)).toBe(false);
  });
});
