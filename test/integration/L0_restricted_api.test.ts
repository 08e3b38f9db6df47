// Triton's restricted APIs on the real engine (after Triton's
// qa/L0_http/http_restricted_api_test.py and its gRPC twin): health and
// inference need `infer-key: infer-value`, the model repository
// `admin-key: admin-value`; other groups stay open. A call without the
// header gets Triton's answer: HTTP 403 "This API is restricted, expecting
// header '<key>'", gRPC UNAVAILABLE "This protocol is restricted, expecting
// header 'triton-grpc-protocol-<key>'". Path spellings the router decodes
// (percent escapes, doubled or trailing slashes) are restricted alike.
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { parseRestrictedFeatures } from '../../engine/frontends/restricted-api.ts';
import { TritonGrpcClient, type ModelInferRequest } from '../../client/grpc-client.ts';
import { grpcError, protoLoaderClient, removeDir, startTestEngine, tempRepo } from './helpers.ts';

let engine: RunningEngine;
let repo: string;
const groups = ['health,inference:infer-key=infer-value', 'model-repository:admin-key=admin-value'];
const INFER = { 'infer-key': 'infer-value' };
const ADMIN = { 'admin-key': 'admin-value' };
const G_INFER = { 'triton-grpc-protocol-infer-key': 'infer-value' };
const G_ADMIN = { 'triton-grpc-protocol-admin-key': 'admin-value' };

const i32 = (v: number[]) => Buffer.from(new Int32Array(v).buffer);
const ONES = Array.from({ length: 16 }, () => 1);
const httpBody = { inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16], data: ONES })) };
const grpcRequest: ModelInferRequest = {
  model_name: 'simple',
  inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16] })),
  raw_input_contents: [i32(ONES), i32(ONES)],
};

async function http(
  method: string,
  p: string,
  headers: Record<string, string> = {},
  body?: unknown,
): Promise<{ status: number; text: string }> {
  const r = await fetch(`http://127.0.0.1:${engine.httpPort}${p}`, {
    method,
    headers: { ...headers, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, text: await r.text() };
}
/** A request with the target exactly as written (fetch would normalise dot segments). */
function rawHttp(method: string, target: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: engine.httpPort, method, path: target }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, text }));
    });
    req.on('error', reject);
    req.end();
  });
}
const restricted = (key: string) => ({ status: 403, text: JSON.stringify({ error: `This API is restricted, expecting header '${key}'` }) });

beforeAll(async () => {
  repo = tempRepo('l0-restricted', ['simple']);
  engine = await startTestEngine({
    modelRepository: repo,
    httpRestricted: parseRestrictedFeatures(groups, 'http-restricted-api'),
    grpcRestricted: parseRestrictedFeatures(groups, 'grpc-restricted-protocol'),
  });
}, 60_000);

afterAll(async () => {
  await engine?.stop();
  removeDir(repo);
});

describe('L0_restricted_api: HTTP', () => {
  it('leaves unlisted groups open (statistics, metadata, model config)', async () => {
    expect((await http('GET', '/v2/models/simple/stats')).status).toBe(200);
    expect((await http('GET', '/v2/models/simple/stats', INFER)).status).toBe(200);
    expect((await http('GET', '/v2')).status).toBe(200);
    expect((await http('GET', '/v2/models/simple/config')).status).toBe(200);
  });

  it('model repository: 403 without admin-key (another group key does not do), the real answer with it', async () => {
    expect(await http('POST', '/v2/repository/models/simple/unload', INFER)).toEqual(restricted('admin-key'));
    expect(await http('POST', '/v2/repository/models/simple/unload', { 'admin-key': 'wrong' })).toEqual(restricted('admin-key'));
    expect(await http('POST', '/v2/repository/index')).toEqual(restricted('admin-key'));
    const through = await http('POST', '/v2/repository/models/simple/unload', ADMIN);
    expect(through.status).toBe(503);
    expect(through.text).toContain('explicit model load / unload is not allowed');
    expect((await http('POST', '/v2/repository/index', ADMIN)).status).toBe(200);
  });

  it('inference and health need infer-key: the direct infer path is restricted too', async () => {
    expect(await http('POST', '/v2/models/simple/infer', { test: '1' }, httpBody)).toEqual(restricted('infer-key'));
    expect(await http('POST', '/v2/models/simple/versions/1/infer', {}, httpBody)).toEqual(restricted('infer-key'));
    const ok = await http('POST', '/v2/models/simple/infer', INFER, httpBody);
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.text).outputs[0].data).toEqual(Array.from({ length: 16 }, () => 2));
    expect(await http('GET', '/v2/health/ready')).toEqual(restricted('infer-key'));
    expect(await http('GET', '/v2/models/simple/ready')).toEqual(restricted('infer-key'));
    expect((await http('GET', '/v2/health/ready', INFER)).status).toBe(200);
    // Checked before the method, as Triton's handlers do.
    expect(await http('DELETE', '/v2/health/live')).toEqual(restricted('infer-key'));
  });

  it('spellings the router decodes do not get around it', async () => {
    const spellings = [
      '/v2/%72epository/index',
      '/v2/repository/%69ndex',
      '//v2/repository/index',
      '/v2//repository/index',
      '/v2/repository/index/',
      '/v2/./repository/index',
      '/v2/x/../repository/index',
      '/v2/repository/index?ready=true',
      '/v2/models/simple/../../repository/index',
    ];
    for (const p of spellings) {
      const r = await rawHttp('POST', p);
      expect(r.status, p).not.toBe(200);
      if (r.status !== 404) expect(r, p).toEqual(restricted('admin-key'));
    }
    // Spellings that do reach the index handler are refused.
    for (const p of ['/v2/%72epository/index', '/v2/./repository/index', '/v2/x/../repository/index'])
      expect(await rawHttp('POST', p), p).toEqual(restricted('admin-key'));
  });
});

describe('L0_restricted_api: gRPC', () => {
  const clients: TritonGrpcClient[] = [];
  const client = (directInfer: boolean, metadata?: Record<string, string>) => {
    const c = new TritonGrpcClient(`127.0.0.1:${engine.grpcPort}`, { directInfer, metadata });
    clients.push(c);
    return c;
  };
  afterAll(() => clients.forEach((c) => c.close()));
  const refused = (key: string) => ({ code: 14, details: `This protocol is restricted, expecting header 'triton-grpc-protocol-${key}'` });

  it('health, ModelInfer (grpc-js and direct clients) and the standard health check need infer-key', async () => {
    for (const direct of [false, true]) {
      const anon = client(direct);
      expect(await grpcError(anon.serverLive())).toEqual(refused('infer-key'));
      expect(await grpcError(anon.modelReady('simple'))).toEqual(refused('infer-key'));
      expect(await grpcError(anon.modelInfer(grpcRequest))).toEqual(refused('infer-key'));
      expect(await grpcError(client(direct, { 'triton-grpc-protocol-infer-key': 'nope' }).modelInfer(grpcRequest))).toEqual(
        refused('infer-key'),
      );
      const res = await client(direct, G_INFER).modelInfer(grpcRequest);
      expect([...new Int32Array(Uint8Array.from(res.raw_output_contents[0]!).buffer)]).toEqual(Array.from({ length: 16 }, () => 2));
    }
    expect((await client(false, G_INFER).serverLive()).live).toBe(true);
    const std = protoLoaderClient(engine.grpcPort);
    try {
      expect(await grpcError(std.health())).toEqual(refused('infer-key'));
    } finally {
      std.close();
    }
    // ModelMetadata and ModelStatistics are not in a restricted group.
    expect((await client(false).modelMetadata('simple')).name).toBe('simple');
    expect((await client(false).modelStatistics('simple')).model_stats.length).toBe(1);
  });

  it('a stream without infer-key ends UNAVAILABLE before reading a request', async () => {
    const stream = client(false).modelStreamInfer();
    const status = await new Promise<{ code: number; details: string }>((resolve) => {
      stream.on('error', (e: { code: number; details: string }) => resolve({ code: e.code, details: e.details }));
      stream.on('data', () => undefined);
      stream.write(grpcRequest);
    });
    expect(status).toEqual(refused('infer-key'));
  });

  it('model repository RPCs need admin-key; with it the engine gives its real answer', async () => {
    expect(await grpcError(client(false, G_INFER).repositoryModelUnload('simple'))).toEqual(refused('admin-key'));
    expect(await grpcError(client(false).repositoryIndex())).toEqual(refused('admin-key'));
    const real = await grpcError(client(false, G_ADMIN).repositoryModelUnload('simple'));
    expect(real.details).toContain('explicit model load / unload is not allowed');
    expect((await client(false, G_ADMIN).repositoryIndex()).map((m) => m.name)).toEqual(['simple']);
  });
});
