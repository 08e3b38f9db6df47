// The typed client against a tiny grpc-js server built from the same protocol
// definitions: request fields (oneof parameters, int64, bytes) arrive as sent,
// replies come back typed, errors keep their gRPC status.
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrpcStatus, TritonGrpcClient, isGrpcStatus, type ModelInferRequest } from '../../client/grpc-client.ts';
import { GRPC_OPTIONS, inferenceService } from '../../protocol/index.ts';

let server: grpc.Server;
let client: TritonGrpcClient;
let lastInfer: Record<string, unknown> | undefined;
const unregistered: string[] = [];

beforeAll(async () => {
  server = new grpc.Server(GRPC_OPTIONS);
  const unimplemented = (_c: unknown, cb: grpc.sendUnaryData<object>) => cb({ code: grpc.status.UNIMPLEMENTED, details: 'no' });
  const impl: Record<string, unknown> = {};
  for (const k of Object.keys(inferenceService())) impl[k] = unimplemented;
  Object.assign(impl, {
    ServerReady: (_c: unknown, cb: grpc.sendUnaryData<object>) => cb(null, { ready: true }),
    ModelMetadata: (c: grpc.ServerUnaryCall<{ name: string }, object>, cb: grpc.sendUnaryData<object>) =>
      c.request.name === 'm'
        ? cb(null, {
            name: 'm',
            versions: ['1'],
            platform: 'ensemble',
            inputs: [{ name: 'X', datatype: 'UINT8', shape: [-1] }],
            outputs: [],
          })
        : cb({ code: grpc.status.NOT_FOUND, details: `unknown model '${c.request.name}'` }),
    ModelInfer: (c: grpc.ServerUnaryCall<Record<string, unknown>, object>, cb: grpc.sendUnaryData<object>) => {
      lastInfer = c.request;
      const raw = (c.request.raw_input_contents as Buffer[]) ?? [];
      cb(null, {
        model_name: c.request.model_name,
        id: c.request.id,
        outputs: [{ name: 'Y', datatype: 'UINT8', shape: [raw[0]?.length ?? 0] }],
        raw_output_contents: raw.map((b) => Buffer.from(b).reverse()),
      });
    },
    SystemSharedMemoryStatus: (_c: unknown, cb: grpc.sendUnaryData<object>) =>
      cb(null, { regions: { r1: { name: 'r1', key: '/r1', offset: 0, byte_size: 2 ** 40 } } }),
    SystemSharedMemoryUnregister: (c: grpc.ServerUnaryCall<{ name: string }, object>, cb: grpc.sendUnaryData<object>) => {
      unregistered.push(c.request.name);
      cb(null, {});
    },
  });
  server.addService(inferenceService(), impl as grpc.UntypedServiceImplementation);
  const port = await new Promise<number>((res, rej) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))),
  );
  client = new TritonGrpcClient(`127.0.0.1:${port}`);
});

afterAll(() => {
  client?.close();
  server?.forceShutdown();
});

describe('TritonGrpcClient', () => {
  it('sends inference requests with oneof parameters, int64 and bytes intact', async () => {
    const req: ModelInferRequest = {
      model_name: 'm',
      id: 'req-1',
      inputs: [
        {
          name: 'X',
          datatype: 'UINT8',
          shape: [3],
          parameters: { shared_memory_region: { string_param: 'r' }, shared_memory_offset: { int64_param: 2 ** 33 } },
        },
      ],
      outputs: [{ name: 'Y', parameters: { binary_data: { bool_param: true } } }],
      raw_input_contents: [Buffer.from([1, 2, 3])],
    };
    const res = await client.modelInfer(req);
    expect(res.id).toBe('req-1');
    expect(res.outputs[0]!.shape).toEqual([3]);
    expect([...res.raw_output_contents[0]!]).toEqual([3, 2, 1]);
    const input = (lastInfer!.inputs as Array<{ parameters: Record<string, Record<string, unknown>> }>)[0]!;
    expect(input.parameters.shared_memory_region!.string_param).toBe('r');
    expect(input.parameters.shared_memory_offset!.int64_param).toBe(2 ** 33);
    const out = (lastInfer!.outputs as Array<{ parameters: Record<string, Record<string, unknown>> }>)[0]!;
    expect(out.parameters.binary_data!.bool_param).toBe(true);
  });

  it('returns typed control replies with int64 as numbers', async () => {
    expect((await client.serverReady()).ready).toBe(true);
    const md = await client.modelMetadata('m');
    expect(md.inputs[0]!.shape).toEqual([-1]);
    const regions = await client.systemSharedMemoryStatus();
    expect(regions.r1!.byte_size).toBe(2 ** 40);
    await client.systemSharedMemoryUnregister('r1');
    expect(unregistered).toEqual(['r1']);
  });

  it('rejects with the gRPC status of the failure', async () => {
    const err = await client.modelMetadata('nope').catch((e) => e);
    expect(isGrpcStatus(err, GrpcStatus.NOT_FOUND)).toBe(true);
    expect(err.details).toBe("unknown model 'nope'");
    expect(isGrpcStatus(await client.repositoryIndex().catch((e) => e), GrpcStatus.UNIMPLEMENTED)).toBe(true);
  });

  it('fails fast with UNAVAILABLE when nothing listens', async () => {
    const dead = new TritonGrpcClient('127.0.0.1:1');
    const err = await dead.serverLive({ timeoutMs: 2000 }).catch((e) => e);
    expect(isGrpcStatus(err, GrpcStatus.UNAVAILABLE)).toBe(true);
    dead.close();
  });
});
