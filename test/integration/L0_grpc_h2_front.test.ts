// The gRPC port on the engine's own HTTP/2 front (engine/frontends/grpc/grpc-h2-front.ts)
// (the TCP port's default, named here with transport grpcFront 'own') against grpc-js serving it alone (grpcFront 'grpc-js'): the RPCs it
// relays to grpc-js give the same answers byte for byte; ModelStreamInfer
// works through the relay (L0_grpc_cancel checks that cancels reach the engine); a large
// tensor crosses every flow-control window both ways; many connections with
// many streams are all answered; a connection that breaks the protocol is
// closed alone; the engine stops promptly with client connections open.
import http2 from 'node:http2';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TritonGrpcClient, type ModelInferRequest } from '../../client/grpc-client.ts';
import type { RunningEngine } from '../../engine/server/server.ts';
import { messageType } from '../../protocol/index.ts';
import { i32Bytes, removeDir, startTestEngine, tempRepo, toI32 } from './helpers.ts';
import { grpcFramed, rawGrpcCall, visible } from '../fixtures/grpc-raw.ts';

let repo: string;
let own: RunningEngine;
let viaGrpcJs: RunningEngine;

beforeAll(async () => {
  repo = tempRepo('l0-h2-front', ['simple', 'js_echo']);
  // the TCP port's default is node:http2 (issue 37)
  own = await startTestEngine({ modelRepository: repo, transport: { grpcFront: 'own' } });
  viaGrpcJs = await startTestEngine({ modelRepository: repo, transport: { grpcFront: 'grpc-js' } });
}, 60_000);

afterAll(async () => {
  await own?.stop();
  await viaGrpcJs?.stop();
  removeDir(repo);
});

const SVC = '/inference.GRPCInferenceService/';
const encode = (type: string, m: object) =>
  grpcFramed(
    messageType(type)
      .encode(m as never)
      .finish(),
  );

/** One raw unary call; what a client sees of the answer (the date header aside). */
const rawCall = async (port: number, path: string, body: Buffer, extra: Record<string, string> = {}) =>
  visible(await rawGrpcCall(port, path, [body], extra));

describe('L0_grpc_h2_front: the own HTTP/2 front', () => {
  it('relays every other RPC to grpc-js: the same answers, errors and metadata as grpc-js alone', async () => {
    const cases: Array<[string, Buffer, Record<string, string>?]> = [
      ['ServerLive', encode('inference.ServerLiveRequest', {})],
      ['ServerMetadata', encode('inference.ServerMetadataRequest', {})],
      ['ModelMetadata', encode('inference.ModelMetadataRequest', { name: 'simple' })],
      ['ModelMetadata', encode('inference.ModelMetadataRequest', { name: 'no_such_model' })],
      ['ModelConfig', encode('inference.ModelConfigRequest', { name: 'simple' })],
      ['RepositoryIndex', encode('inference.RepositoryIndexRequest', {})],
      ['ModelReady', encode('inference.ModelReadyRequest', { name: 'simple' }), { 'x-custom': 'kept', 'grpc-timeout': '5S' }],
      ['NoSuchMethod', encode('inference.ServerLiveRequest', {})],
    ];
    for (const [method, body, extra] of cases) {
      const [a, b] = await Promise.all([
        rawCall(own.grpcPort, SVC + method, body, extra),
        rawCall(viaGrpcJs.grpcPort, SVC + method, body, extra),
      ]);
      expect(a, method).toEqual(b);
    }
    const health = encode('grpc.health.v1.HealthCheckRequest', {});
    expect(await rawCall(own.grpcPort, '/grpc.health.v1.Health/Check', health)).toEqual(
      await rawCall(viaGrpcJs.grpcPort, '/grpc.health.v1.Health/Check', health),
    );
  });

  it('ModelStreamInfer through the relay: responses in order; a cancelled call ends CANCELLED and the engine keeps serving', async () => {
    const c = new TritonGrpcClient(`127.0.0.1:${own.grpcPort}`);
    try {
      const call = c.modelStreamInfer();
      const got: number[] = [];
      const done = new Promise<void>((resolve, reject) => {
        call.on('data', (r) => got.push(new Float32Array(Uint8Array.from(r.infer_response!.raw_output_contents![0]!).buffer)[0]!));
        call.on('end', resolve);
        call.on('error', reject);
      });
      for (let i = 0; i < 5; i++) {
        call.write({
          model_name: 'js_echo',
          inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }],
          raw_input_contents: [Buffer.from(new Float32Array([i]).buffer)],
        });
      }
      call.end();
      await done;
      expect(got).toEqual([0, 1, 2, 3, 4]);
      // A slow request, cancelled: the call ends CANCELLED on the client and the engine keeps serving.
      const slow = c.modelStreamInfer();
      const ended = new Promise<string>((r) => slow.on('error', (e) => r(String((e as { code?: number }).code))));
      slow.write({
        model_name: 'js_echo',
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }],
        raw_input_contents: [Buffer.from(new Float32Array([1]).buffer)],
        parameters: { delay_ms: { int64_param: 500 } },
      });
      await new Promise((r) => setTimeout(r, 100));
      slow.cancel();
      expect(await ended).toBe('1');
      const after = await c.modelInfer({
        model_name: 'js_echo',
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }],
        raw_input_contents: [Buffer.from(new Float32Array([9]).buffer)],
      });
      expect(after.outputs?.[0]?.name).toBe('OUTPUT0');
    } finally {
      c.close();
    }
  });

  it('a large tensor crosses every window both ways, to a client with small windows', async () => {
    const n = 2 << 20; // 8 MiB of FP32
    const input = new Float32Array(n).map((_, i) => i % 1000);
    const req: ModelInferRequest = {
      model_name: 'js_echo',
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [n] }],
      raw_input_contents: [Buffer.from(input.buffer)],
    };
    const session = http2.connect(`http://127.0.0.1:${own.grpcPort}`, { settings: { initialWindowSize: 16_384 } });
    try {
      const out = await new Promise<Buffer>((resolve, reject) => {
        const r = session.request({ ':method': 'POST', ':path': `${SVC}ModelInfer`, 'content-type': 'application/grpc', te: 'trailers' });
        const data: Buffer[] = [];
        r.on('data', (d: Buffer) => data.push(d));
        r.on('trailers', (t) => (t['grpc-status'] === '0' ? undefined : reject(new Error(String(t['grpc-message'])))));
        r.on('end', () => resolve(Buffer.concat(data)));
        r.on('error', reject);
        r.end(encode('inference.ModelInferRequest', req));
      });
      const res = messageType('inference.ModelInferResponse').decode(out.subarray(5)) as unknown as { raw_output_contents: Uint8Array[] };
      expect(Buffer.from(res.raw_output_contents[0]!).equals(Buffer.from(input.buffer))).toBe(true);
    } finally {
      session.destroy();
    }
  }, 60_000);

  it('16 connections with 20 streams each, at once: every call answered right', async () => {
    const simple: ModelInferRequest = {
      model_name: 'simple',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16] },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
      ],
      raw_input_contents: [i32Bytes(Array.from({ length: 16 }, (_, i) => i)), i32Bytes(Array(16).fill(3))],
    };
    const clients = Array.from(
      { length: 16 },
      () => new TritonGrpcClient(`127.0.0.1:${own.grpcPort}`, { channelOptions: { 'grpc.use_local_subchannel_pool': 1 } }),
    );
    try {
      const results = await Promise.all(clients.flatMap((c) => Array.from({ length: 20 }, () => c.modelInfer(simple))));
      for (const r of results) expect([...toI32(r.raw_output_contents[0]!)]).toEqual(Array.from({ length: 16 }, (_, i) => i + 3));
    } finally {
      for (const c of clients) c.close();
    }
  });

  it('a connection that breaks the protocol is closed alone; the engine stops promptly with client connections open', async () => {
    const c = new TritonGrpcClient(`127.0.0.1:${own.grpcPort}`);
    try {
      expect((await c.serverLive()).live).toBe(true);
      const bad = net.connect(own.grpcPort, '127.0.0.1');
      bad.on('error', () => undefined);
      bad.resume(); // read, so its end (after the server's GOAWAY) is seen
      const closed = new Promise((r) => bad.once('close', r));
      bad.write('GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n');
      await closed;
      expect((await c.serverLive()).live).toBe(true);
    } finally {
      c.close();
    }
    const extra = await startTestEngine({ modelRepository: repo });
    const idle = http2.connect(`http://127.0.0.1:${extra.grpcPort}`);
    idle.on('error', () => undefined);
    await new Promise((r) => idle.once('connect', r));
    const t0 = Date.now();
    await extra.stop();
    expect(Date.now() - t0).toBeLessThan(6000);
    idle.destroy();
  }, 30_000);
});
