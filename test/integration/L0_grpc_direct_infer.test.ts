// Unary ModelInfer served directly (engine/frontends/grpc/grpc-direct-infer.ts),
// on the engine's own HTTP/2 front (transport grpcFront 'own', the default) and
// on node:http2 beside grpc-js (grpcFront 'grpc-js'), must look, on the wire, exactly like
// grpc-js serving it: the same cases are sent as raw HTTP/2 to engines of
// each kind and to one where grpc-js serves every call on node:http2
// (grpcFront 'grpc-js', grpcDirectInfer false), and the answers
// (status, headers, trailers, message bytes) are compared; also to the own
// front relaying ModelInfer to grpc-js (grpcDirectInfer false). Also: compressed calls still reach grpc-js,
// a client reset mid-inference leaves the engine serving, and the shape check
// of grpc-js's internals (grpc-js-internals.ts) accepts the grpc-js in the tree.
import http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TritonGrpcClient, type ModelInferRequest } from '../../client/grpc-client.ts';
import type { RunningEngine } from '../../engine/server/server.ts';
import type { EngineTransport } from '../../engine/frontends/transport-options.ts';
import { MODEL_INFER_PATH } from '../../engine/frontends/grpc/grpc-direct-infer.ts';
import { reachIntoGrpcJs, shapeProblem } from '../../engine/frontends/grpc/grpc-js-internals.ts';
import { messageType } from '../../protocol/index.ts';
import { i32Bytes, removeDir, startTestEngine, tempRepo, toI32 } from './helpers.ts';
import { grpcFramed, rawGrpcCall, visible } from '../fixtures/grpc-raw.ts';

let repo: string;
/** The own HTTP/2 front answering ModelInfer itself (forced on TCP). */
let direct: RunningEngine;
/** grpc-js alone, on node:http2: the reference. */
let viaGrpcJs: RunningEngine;
/** The others that must answer like it: the direct path on node:http2, and the own front relaying to grpc-js. */
const others: Record<string, RunningEngine> = {};

beforeAll(async () => {
  repo = tempRepo('l0-direct', ['simple', 'js_echo']);
  const start = (transport: Partial<EngineTransport> = {}) => startTestEngine({ modelRepository: repo, transport });
  direct = await start({ grpcFront: 'own' });
  viaGrpcJs = await start({ grpcFront: 'grpc-js', grpcDirectInfer: false });
  others['direct on node:http2'] = await start({ grpcFront: 'grpc-js' });
  others['own front relaying to grpc-js'] = await start({ grpcFront: 'own', grpcDirectInfer: false });
}, 60_000);

afterAll(async () => {
  await direct?.stop();
  await viaGrpcJs?.stop();
  for (const e of Object.values(others)) await e.stop();
  removeDir(repo);
});

const frame = grpcFramed;
const encodeReq = (req: ModelInferRequest) =>
  messageType('inference.ModelInferRequest')
    .encode(req as never)
    .finish();

const SIMPLE: ModelInferRequest = {
  model_name: 'simple',
  id: 'r1',
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16] },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
  ],
  raw_input_contents: [i32Bytes(Array.from({ length: 16 }, (_, i) => i)), i32Bytes(Array(16).fill(2))],
};

const rawCall = (port: number, chunks: Buffer[], extra: Record<string, string> = {}, gapMs = 0) =>
  rawGrpcCall(port, MODEL_INFER_PATH, chunks, extra, gapMs);

async function same(chunks: Buffer[], extra: Record<string, string> = {}, gapMs = 0) {
  const [a, b, ...rest] = await Promise.all(
    [direct, viaGrpcJs, ...Object.values(others)].map((e) => rawCall(e.grpcPort, chunks, extra, gapMs)),
  );
  expect(visible(a!), 'own front, direct').toEqual(visible(b!));
  Object.keys(others).forEach((name, i) => expect(visible(rest[i]!), name).toEqual(visible(b!)));
  return visible(a!);
}

describe('L0_grpc_direct_infer: the direct ModelInfer path answers exactly like grpc-js', () => {
  it('a good call: same headers, message bytes and OK trailers', async () => {
    const a = await same([frame(encodeReq(SIMPLE))]);
    expect(a.headers['content-type']).toBe('application/grpc+proto');
    expect(a.trailers['grpc-status']).toBe('0');
    const res = messageType('inference.ModelInferResponse').decode(Buffer.from(a.data, 'hex').subarray(5)) as unknown as {
      id: string;
      raw_output_contents: Uint8Array[];
    };
    expect(res.id).toBe('r1');
    expect([...toI32(res.raw_output_contents[0]!)]).toEqual(Array.from({ length: 16 }, (_, i) => i + 2));
  });

  it('a message split over many DATA frames arrives whole', async () => {
    const f = frame(encodeReq(SIMPLE));
    const a = await same([f.subarray(0, 3), f.subarray(3, 40), f.subarray(40)], {}, 5);
    expect(a.trailers['grpc-status']).toBe('0');
  });

  it('errors: unknown model, bad datatype, missing raw contents: same code and message', async () => {
    const unknown = await same([frame(encodeReq({ ...SIMPLE, model_name: 'no_such_model' }))]);
    expect(unknown.headers['grpc-status']).not.toBe('0');
    expect(decodeURI(String(unknown.headers['grpc-message']))).toContain('no_such_model');
    await same([frame(encodeReq({ ...SIMPLE, inputs: [{ ...SIMPLE.inputs![0]!, datatype: 'NOPE' }, SIMPLE.inputs![1]!] }))]);
    await same([frame(encodeReq({ ...SIMPLE, raw_input_contents: [SIMPLE.raw_input_contents![0]!] }))]);
  });

  it('protocol faults: no message, two messages, compressed flag with identity encoding, undecodable bytes', async () => {
    const none = await same([]);
    expect(none.headers['grpc-status']).toBe(String(grpc.status.UNIMPLEMENTED));
    const f = frame(encodeReq(SIMPLE));
    const two = await same([Buffer.concat([f, f])]);
    expect(two.headers['grpc-status']).toBe(String(grpc.status.UNIMPLEMENTED));
    // grpc-js reads it as uncompressed when the call's encoding is identity.
    const flagged = await same([frame(encodeReq(SIMPLE), 1)]);
    expect(flagged.trailers['grpc-status']).toBe('0');
    const garbage = await same([frame(Buffer.from([0xff, 0xff, 0xff, 0xff, 0x0f]))]);
    expect(garbage.headers['grpc-status']).toBe(String(grpc.status.INTERNAL));
  });

  it('grpc-timeout: an invalid value, and a deadline that expires during the inference', async () => {
    const bad = await same([frame(encodeReq(SIMPLE))], { 'grpc-timeout': 'soon' });
    expect(bad.headers['grpc-status']).toBe(String(grpc.status.INTERNAL));
    // grpc-js reads the value with an unanchored pattern that allows blanks before the unit.
    const spaced = await same([frame(encodeReq(SIMPLE))], { 'grpc-timeout': '5 S' });
    expect(spaced.trailers['grpc-status']).toBe('0');
    const slow: ModelInferRequest = {
      model_name: 'js_echo',
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }],
      raw_input_contents: [Buffer.from(new Float32Array([7]).buffer)],
      parameters: { delay_ms: { int64_param: 400 } },
    };
    const late = await same([frame(encodeReq(slow))], { 'grpc-timeout': '50m' });
    expect(late.headers['grpc-status']).toBe(String(grpc.status.DEADLINE_EXCEEDED));
    expect(decodeURI(String(late.headers['grpc-message']))).toBe('Deadline exceeded');
  });

  it('a gzip-compressed call goes to grpc-js and succeeds', async () => {
    const c = new TritonGrpcClient(`127.0.0.1:${direct.grpcPort}`, { channelOptions: { 'grpc.default_compression_algorithm': 2 } });
    try {
      const res = await c.modelInfer(SIMPLE);
      expect([...toI32(res.raw_output_contents[0]!)]).toEqual(Array.from({ length: 16 }, (_, i) => i + 2));
    } finally {
      c.close();
    }
  });

  it('a client that resets its stream mid-inference leaves the engine serving', async () => {
    const session = http2.connect(`http://127.0.0.1:${direct.grpcPort}`);
    const slow: ModelInferRequest = {
      model_name: 'js_echo',
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }],
      raw_input_contents: [Buffer.from(new Float32Array([7]).buffer)],
      parameters: { delay_ms: { int64_param: 300 } },
    };
    const req = session.request({ ':method': 'POST', ':path': MODEL_INFER_PATH, 'content-type': 'application/grpc', te: 'trailers' });
    req.on('error', () => undefined);
    req.end(frame(encodeReq(slow)));
    await new Promise((r) => setTimeout(r, 50));
    req.close(http2.constants.NGHTTP2_CANCEL);
    await new Promise((r) => setTimeout(r, 400));
    session.close();
    const a = await rawCall(direct.grpcPort, [frame(encodeReq(SIMPLE))]);
    expect(a.trailers['grpc-status']).toBe('0');
  });
});

describe('grpc-js internals', () => {
  it('the shape check accepts the grpc-js in the tree (else the engine silently falls back to grpc-js alone)', async () => {
    const server = new grpc.Server();
    await new Promise<void>((res, rej) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e) => (e ? rej(e) : res())),
    );
    try {
      expect(shapeProblem(server)).toBeUndefined();
    } finally {
      server.forceShutdown();
    }
  });

  it('a grpc-js of another shape: one log line, and none of the reaches applied', async () => {
    const server = new grpc.Server();
    await new Promise<void>((res, rej) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e) => (e ? rej(e) : res())),
    );
    try {
      const h2 = [...(server as unknown as { http2Servers: Map<http2.Http2Server, unknown> }).http2Servers.keys()][0]!;
      h2.on('stream', () => undefined); // a second stream listener: not what the direct path was written for
      const sessionListeners = h2.listeners('session').length;
      expect(shapeProblem(server)).toMatch(/exactly one stream listener/);
      const route = { accepts: () => true, serve: () => undefined };
      expect(reachIntoGrpcJs(server, { widenHttp2: true, route, pooledDecoder: false })).toBe(false);
      expect(h2.listeners('stream').length).toBe(2);
      expect(h2.listeners('session').length).toBe(sessionListeners);
    } finally {
      server.forceShutdown();
    }
  });
});
