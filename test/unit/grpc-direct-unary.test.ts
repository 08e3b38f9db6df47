// TritonGrpcClient's direct ModelInfer (net/h2/grpc-direct-unary.ts) against a
// plain grpc-js server (not the engine): each case is made once through
// grpc-js and once directly, and both must see the same thing — the reply,
// the status code and text of a failure, a deadline, metadata, nothing
// listening — plus a server restart between calls and a Unix socket target.
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { GrpcStatus, TritonGrpcClient, type ModelInferRequest } from '../../client/grpc-client.ts';
import { DirectUnaryChannel } from '../../net/h2/grpc-direct-unary.ts';
import { GRPC_OPTIONS, inferenceService } from '../../protocol/index.ts';
import { EngineClient } from '../../gateway/upstream/engine-client.ts';
import { parseArgs as parseGatewayArgs } from '../../gateway/main.ts';

const SOCK = path.join(os.tmpdir(), `direct-unary-${process.pid}.sock`);
let seenTraceparent: string | undefined;

function startServer(address: string, options: grpc.ServerOptions = {}): Promise<{ server: grpc.Server; port: number }> {
  const server = new grpc.Server({ ...GRPC_OPTIONS, ...options });
  const impl: Record<string, unknown> = {};
  for (const k of Object.keys(inferenceService()))
    impl[k] = (_c: unknown, cb: grpc.sendUnaryData<object>) => cb({ code: grpc.status.UNIMPLEMENTED, details: 'no' });
  impl.ModelInfer = (c: grpc.ServerUnaryCall<ModelInferRequest, object>, cb: grpc.sendUnaryData<object>) => {
    seenTraceparent = c.metadata.get('traceparent')[0] as string | undefined;
    const r = c.request;
    if (r.model_name === 'missing') return cb({ code: grpc.status.NOT_FOUND, details: `unknown model 'missing' (100% "gone")` });
    const x = r.raw_input_contents![0]!;
    const reply = () =>
      cb(null, {
        model_name: r.model_name,
        id: r.id,
        parameters: r.parameters,
        outputs: [{ name: 'Y', datatype: 'UINT8', shape: [x.length] }],
        raw_output_contents: [Buffer.from(x).reverse()],
      });
    if (r.model_name === 'sink') return cb(null, { model_name: r.model_name, outputs: [], raw_output_contents: [] });
    if (r.model_name === 'slow') setTimeout(reply, 300);
    else reply();
  };
  server.addService(inferenceService(), impl as grpc.UntypedServiceImplementation);
  return new Promise((res, rej) =>
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (e, port) => (e ? rej(e) : res({ server, port }))),
  );
}

let server: grpc.Server;
let port: number;
let viaGrpcJs: TritonGrpcClient;
let direct: TritonGrpcClient;

beforeAll(async () => {
  ({ server, port } = await startServer('127.0.0.1:0'));
  viaGrpcJs = new TritonGrpcClient(`127.0.0.1:${port}`);
  direct = new TritonGrpcClient(`127.0.0.1:${port}`, { directInfer: true });
});

afterAll(() => {
  viaGrpcJs?.close();
  direct?.close();
  server?.forceShutdown();
});

const REQ: ModelInferRequest = {
  model_name: 'm',
  id: 'q7',
  parameters: { n: { int64_param: 2 ** 40 }, s: { string_param: 'x' } },
  inputs: [{ name: 'X', datatype: 'UINT8', shape: [3] }],
  raw_input_contents: [Buffer.from([1, 2, 3])],
};

async function outcome(p: Promise<unknown>): Promise<unknown> {
  try {
    return { ok: await p };
  } catch (e) {
    const err = e as grpc.ServiceError;
    return { code: err.code, details: err.details };
  }
}

describe('direct ModelInfer client', () => {
  it('gets the same reply as grpc-js, parameters and bytes intact', async () => {
    const a = await outcome(direct.modelInfer(REQ));
    expect(a).toEqual(await outcome(viaGrpcJs.modelInfer(REQ)));
    const res = (a as { ok: { id: string; raw_output_contents: Buffer[] } }).ok;
    expect(res.id).toBe('q7');
    expect([...res.raw_output_contents[0]!]).toEqual([3, 2, 1]);
  });

  it('reports a failure with the same code and text as grpc-js', async () => {
    const a = await outcome(direct.modelInfer({ ...REQ, model_name: 'missing' }));
    expect(a).toEqual({ code: GrpcStatus.NOT_FOUND, details: `unknown model 'missing' (100% "gone")` });
    expect(a).toEqual(await outcome(viaGrpcJs.modelInfer({ ...REQ, model_name: 'missing' })));
  });

  it('ends a call at its deadline with DEADLINE_EXCEEDED', async () => {
    const t0 = Date.now();
    const a = await outcome(direct.modelInfer({ ...REQ, model_name: 'slow' }, { timeoutMs: 50 }));
    expect(a).toEqual({ code: GrpcStatus.DEADLINE_EXCEEDED, details: 'Deadline exceeded' });
    expect(Date.now() - t0).toBeLessThan(250);
    // grpc-js adds timings to the text ("Deadline exceeded after 0.051s,..."); the code is what callers use.
    expect(await outcome(viaGrpcJs.modelInfer({ ...REQ, model_name: 'slow' }, { timeoutMs: 50 }))).toMatchObject({
      code: GrpcStatus.DEADLINE_EXCEEDED,
      details: expect.stringMatching(/^Deadline exceeded/),
    });
  });

  it('sends metadata as headers', async () => {
    const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    await direct.modelInfer(REQ, { metadata: { traceparent: tp } });
    expect(seenTraceparent).toBe(tp);
  });

  it('fails with UNAVAILABLE when nothing listens', async () => {
    const c = new TritonGrpcClient('127.0.0.1:1', { directInfer: true });
    try {
      expect(await outcome(c.modelInfer(REQ))).toMatchObject({ code: GrpcStatus.UNAVAILABLE });
    } finally {
      c.close();
    }
  });

  it('reconnects after the server restarts', async () => {
    const s = await startServer('127.0.0.1:0');
    const c = new TritonGrpcClient(`127.0.0.1:${s.port}`, { directInfer: true });
    try {
      expect(await outcome(c.modelInfer(REQ))).toHaveProperty('ok');
      s.server.forceShutdown();
      await new Promise((r) => setTimeout(r, 50));
      expect(await outcome(c.modelInfer(REQ))).toMatchObject({ code: GrpcStatus.UNAVAILABLE });
      const again = await startServer(`127.0.0.1:${s.port}`);
      try {
        expect(await outcome(c.modelInfer(REQ))).toHaveProperty('ok');
      } finally {
        again.server.forceShutdown();
      }
    } finally {
      c.close();
    }
  });

  it('reaches a unix: target', async () => {
    const s = await startServer(`unix:${SOCK}`);
    const c = new TritonGrpcClient(`unix:${SOCK}`, { directInfer: true });
    try {
      expect(await outcome(c.modelInfer(REQ))).toEqual(await outcome(viaGrpcJs.modelInfer(REQ)));
    } finally {
      c.close();
      s.server.forceShutdown();
    }
  });

  it("keeps to the server's concurrent-stream limit: more calls than it allows all succeed", async () => {
    const s = await startServer('127.0.0.1:0', { 'grpc.max_concurrent_streams': 10 });
    const c = new TritonGrpcClient(`127.0.0.1:${s.port}`, { directInfer: true });
    try {
      const all = await Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          outcome(c.modelInfer({ ...REQ, model_name: i % 2 ? 'slow' : 'm', id: String(i) }, { timeoutMs: 10_000 })),
        ),
      );
      expect(all.filter((o) => 'ok' in (o as object))).toHaveLength(60);
      // A call still waiting for a slot when its deadline passes fails with DEADLINE_EXCEEDED; the slots stay usable.
      const late = await Promise.all(
        Array.from({ length: 30 }, () => outcome(c.modelInfer({ ...REQ, model_name: 'slow' }, { timeoutMs: 400 }))),
      );
      expect(late.filter((o) => 'ok' in (o as object)).length).toBeGreaterThanOrEqual(10);
      expect(late.filter((o) => (o as { code?: number }).code === GrpcStatus.DEADLINE_EXCEEDED).length).toBeGreaterThan(0);
      expect(await outcome(c.modelInfer(REQ))).toHaveProperty('ok');
    } finally {
      c.close();
      s.server.forceShutdown();
    }
  });

  it('sends a large message behind its prefix as it is, never copied into a framed buffer', async () => {
    const req: ModelInferRequest = {
      ...REQ,
      model_name: 'sink',
      inputs: [{ name: 'X', datatype: 'UINT8', shape: [1 << 20] }],
      raw_input_contents: [Buffer.alloc(1 << 20, 7)],
    };
    const framed = 5 + inferenceService().ModelInfer!.requestSerialize(req).length;
    // A framed copy would be made with Buffer.allocUnsafe/alloc or Buffer.concat: watch all three. The
    // server is in this process too, so only allocations made from the client's file count.
    const big: string[] = [];
    const spies = (['allocUnsafe', 'alloc', 'concat'] as const).map((name) => {
      const original = Buffer[name] as (...a: unknown[]) => Buffer;
      const spy = vi.spyOn(Buffer, name) as unknown as { mockImplementation(f: (...a: unknown[]) => Buffer): { mockRestore(): void } };
      return spy.mockImplementation((...a: unknown[]) => {
        const out = original.apply(Buffer, a);
        if (out.length >= framed) big.push(new Error().stack ?? '');
        return out;
      });
    });
    const spy = { mockRestore: () => spies.forEach((s) => s.mockRestore()) };
    try {
      // The watch sees allocations at all (whether the server's decoder allocates depends on how Node chunks the body).
      Buffer.concat([Buffer.alloc(framed)]);
      expect(big.length).toBeGreaterThan(0);
      big.length = 0;
      expect(await outcome(direct.modelInfer(req))).toHaveProperty('ok');
      expect(big.filter((stack) => stack.includes('net/h2/grpc-direct-unary.ts'))).toEqual([]);
    } finally {
      spy.mockRestore();
    }
  });

  it('takes host:port, [v6]:port and unix: targets, and leaves other schemes to grpc-js', () => {
    expect(['127.0.0.1:8001', 'engine.svc:8001', '[::1]:8001', 'unix:/tmp/e.sock'].every(DirectUnaryChannel.accepts)).toBe(true);
    expect(['dns:///engine:8001', 'unix-abstract:x', 'engine'].some(DirectUnaryChannel.accepts)).toBe(false);
  });
});

describe("the gateway's engine client", () => {
  it('calls ModelInfer directly, and through grpc-js with the transport option engineGrpcDirect false (GATEWAY_GRPC_DIRECT_INFER=0)', async () => {
    const spy = vi.spyOn(DirectUnaryChannel.prototype, 'call');
    const run = async (env: NodeJS.ProcessEnv) => {
      const e = new EngineClient(`127.0.0.1:${port}`, { grpcDirect: parseGatewayArgs([], env).transport?.engineGrpcDirect });
      try {
        const res = await e.infer(REQ, 'fn', 5000);
        expect([...res.raw_output_contents![0]!]).toEqual([3, 2, 1]);
      } finally {
        e.close();
      }
    };
    try {
      await run({});
      expect(spy).toHaveBeenCalledTimes(1);
      await run({ GATEWAY_GRPC_DIRECT_INFER: '0' });
      expect(spy).toHaveBeenCalledTimes(1);
    } finally {
      spy.mockRestore();
    }
  });
});
