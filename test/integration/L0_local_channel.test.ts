// The local channel (docs/engine/local-channel.md) against gRPC: real
// engines with --local-socket, real gateways, real sockets. Two gateways on
// one engine, one sending ModelInfer over the channel and one over gRPC,
// must answer the same calls with the same status, headers and body:
// success, gateway and engine input errors, a model that fails, a deadline,
// staged (shm) bodies, a restricted engine with the right, a wrong and no
// key. Then: a missing socket falls back to gRPC; an engine restart is
// reconnected; the channel carried the calls it should (engine and gateway
// counters). Raw-socket cases (version, garbage, cancellation) are in
// L0_local_channel_wire.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { localCallsServed } from '../../net/local/local-server-connection.ts';
import { parseRestrictedFeatures } from '../../engine/frontends/restricted-api.ts';
import { setQuiet } from '../../common/logger.ts';
import { BUNDLED_REPO, startTestEngine } from './helpers.ts';
import { freePort, waitFor } from './L0_gateway-support.ts';

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

function send(port: number, fn: string, body: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: `/fn/${fn}`,
        headers: { 'content-type': 'application/json', ...headers },
        agent: false,
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (d: Buffer) => parts.push(d));
        res.on('end', () => {
          const h = { ...res.headers } as Record<string, string>;
          delete h.date;
          resolve({ status: res.statusCode!, headers: h, body: Buffer.concat(parts).toString('utf8') });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const tmp = (p: string) => fs.mkdtempSync(path.join(os.tmpdir(), p));
const row = (k: number) => Array.from({ length: 64 }, (_, i) => Math.sin(i * 0.3 + k));
const rec = (rows: number[][], id: string) =>
  [JSON.stringify({ inputs: { user_features: rows } }), { 'x-api-key': 'k-lc', 'x-request-id': id }] as const;

let dir: string;
let repo: string;
let fnDir: string;
let engine: RunningEngine;
let locked: RunningEngine | undefined;
const gateways: RunningGateway[] = [];

async function gateway(
  engineAt: RunningEngine,
  sock: string | undefined,
  name: string,
  env: Record<string, string> = {},
): Promise<RunningGateway> {
  Object.assign(process.env, env);
  try {
    const gw = await startGateway({
      host: '127.0.0.1',
      port: 0,
      engine: `127.0.0.1:${engineAt.grpcPort}`,
      transport: { engineLocalSocket: sock },
      engineLocalRetryMs: 100,
      functions: fnDir,
      shmThreshold: 4096,
      arenaRegions: 1,
      arenaRegionBytes: 1 << 20,
      console: false,
      prefix: `glc${process.pid}${name}`,
    });
    gateways.push(gw);
    return gw;
  } finally {
    for (const k of Object.keys(env)) delete process.env[k];
  }
}

beforeAll(async () => {
  setQuiet(true);
  dir = tmp('l0-local-');
  repo = path.join(dir, 'repo');
  fs.mkdirSync(path.join(repo, 'slow_echo', '1'), { recursive: true });
  fs.cpSync(path.join(BUNDLED_REPO, 'product_recommender_model'), path.join(repo, 'product_recommender_model'), { recursive: true });
  fs.writeFileSync(
    path.join(repo, 'slow_echo', 'config.pbtxt'),
    [
      'name: "slow_echo"',
      'backend: "js"',
      'max_batch_size: 0',
      'input [ { name: "X", data_type: TYPE_INT32, dims: [ -1 ] } ]',
      'output [ { name: "Y", data_type: TYPE_INT32, dims: [ -1 ] } ]',
    ].join('\n'),
  );
  // X[0] < 0: the model fails; otherwise it sleeps X[0] ms and echoes.
  fs.writeFileSync(
    path.join(repo, 'slow_echo', '1', 'model.js'),
    [
      'export async function execute(requests) {',
      '  const d = requests[0].inputs.X.data;',
      '  const ms = new DataView(d.buffer, d.byteOffset, d.byteLength).getInt32(0, true);',
      '  if (ms < 0) throw new Error(`slow_echo refuses ${ms}`);',
      '  await new Promise((r) => setTimeout(r, ms));',
      '  return requests.map((r) => ({ outputs: { Y: { datatype: "INT32", shape: r.inputs.X.shape, data: r.inputs.X.data } } }));',
      '}',
    ].join('\n'),
  );
  fnDir = path.join(dir, 'fn');
  fs.mkdirSync(fnDir);
  const recFn = JSON.parse(fs.readFileSync(path.join(BUNDLED_REPO, '../functions/product_recommender.json'), 'utf8'));
  fs.writeFileSync(path.join(fnDir, 'product_recommender.json'), JSON.stringify({ ...recFn, auth: { apiKeyEnv: ['LC_KEYS'] } }));
  fs.writeFileSync(
    path.join(fnDir, 'slow_echo.json'),
    JSON.stringify({
      name: 'slow_echo',
      target: { model: 'slow_echo' },
      inputs: { x: 'X' },
      outputs: { y: 'Y' },
      limits: { maxBodyBytes: 1 << 20, timeoutMs: 300 },
    }),
  );
  fs.writeFileSync(
    path.join(fnDir, 'ghost.json'),
    JSON.stringify({ name: 'ghost', target: { model: 'no_such_model' }, inputs: { x: 'X' }, outputs: { y: 'Y' } }),
  );
  process.env.LC_KEYS = 'k-lc';
  engine = await startTestEngine({ modelRepository: repo, httpPort: -1, metricsPort: -1, localSocket: path.join(dir, 'engine.sock') });
}, 120_000);

afterAll(async () => {
  for (const g of gateways) await g.stop();
  await engine?.stop();
  await locked?.stop();
  delete process.env.LC_KEYS;
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

const CASES: Array<[string, string, string, Record<string, string>]> = [
  ['one row', 'product_recommender', ...rec([row(1)], 'a1')],
  ['three rows', 'product_recommender', ...rec([row(1), row(2), row(3)], 'a2')],
  [
    'staged through shm',
    'product_recommender',
    ...rec(
      Array.from({ length: 40 }, (_, i) => row(i)),
      'a3',
    ),
  ],
  [
    'batch over the engine limit (engine INVALID_ARG)',
    'product_recommender',
    ...rec(
      Array.from({ length: 65 }, (_, i) => row(i)),
      'a4',
    ),
  ],
  ['gateway input error', 'product_recommender', ...rec([[1, 2, 3]], 'a5')],
  ['no key', 'product_recommender', JSON.stringify({ inputs: { user_features: [row(1)] } }), {}],
  ['unknown function', 'no_such_fn', '{}', {}],
  ['function of an unknown model', 'ghost', JSON.stringify({ inputs: { x: [1] } }), { 'x-request-id': 'g1' }],
  ['int echo', 'slow_echo', JSON.stringify({ inputs: { x: [1, 2, 3] } }), { 'x-request-id': 's1' }],
  ['model fails (engine INTERNAL)', 'slow_echo', JSON.stringify({ inputs: { x: [-5] } }), { 'x-request-id': 's2' }],
  ['deadline exceeded', 'slow_echo', JSON.stringify({ inputs: { x: [900] } }), { 'x-request-id': 's3' }],
];

/** Each case's status (so a case that stopped reaching the path it tests fails). */
const EXPECTED: Record<string, number> = {
  'one row': 200,
  'three rows': 200,
  'staged through shm': 200,
  'batch over the engine limit (engine INVALID_ARG)': 400,
  'gateway input error': 400,
  'no key': 401,
  'unknown function': 404,
  'function of an unknown model': 503,
  'int echo': 200,
  'model fails (engine INTERNAL)': 502,
  'deadline exceeded': 504,
};

describe('L0_local_channel: the same answers over the local channel and over gRPC', () => {
  let viaLocal: RunningGateway;
  let viaGrpc: RunningGateway;
  beforeAll(async () => {
    viaLocal = await gateway(engine, path.join(dir, 'engine.sock'), 'l');
    viaGrpc = await gateway(engine, undefined, 'g');
    await waitFor(
      'the local channel to open',
      async () =>
        (await send(viaLocal.port, ...(CASES[0]!.slice(1) as [string, string, Record<string, string>]))).status === 200 &&
        viaLocal.engine.localCalls > 0,
    );
  });

  it.each(CASES)('%s', async (_n, fn, body, headers) => {
    const before = [viaLocal.engine.localCalls, localCallsServed()];
    const [a, b] = [await send(viaLocal.port, fn, body, headers), await send(viaGrpc.port, fn, body, headers)];
    expect(a).toEqual(b);
    expect(a.status).toBe(EXPECTED[_n]);
    // Calls that reach the engine's ModelInfer went over the channel from the first gateway.
    if (a.status === 200) expect(localCallsServed()).toBeGreaterThan(before[1]!);
    if (
      fn !== 'no_such_fn' &&
      fn !== 'ghost' &&
      a.status !== 401 &&
      !(a.status === 400 && /input/.test(a.body) && !/engine/.test(a.body))
    ) {
      expect(viaLocal.engine.localCalls).toBeGreaterThan(before[0]!);
    }
    expect(viaGrpc.engine.localCalls).toBe(0);
  });

  it('the staged call went through shm on both paths', async () => {
    const c = CASES[2]!;
    expect((await send(viaLocal.port, c[1], c[2], c[3])).headers['x-payload-transfer']).toBe('shm');
  });

  it('a missing socket falls back to gRPC with the same answers', async () => {
    const gw = await gateway(engine, path.join(dir, 'missing.sock'), 'm');
    const [a, b] = [
      await send(gw.port, ...(CASES[1]!.slice(1) as [string, string, Record<string, string>])),
      await send(viaGrpc.port, ...(CASES[1]!.slice(1) as [string, string, Record<string, string>])),
    ];
    expect(a).toEqual(b);
    expect(a.status).toBe(200);
    expect(gw.engine.localCalls).toBe(0);
  });
});

describe('L0_local_channel: a restricted engine checks the key on the channel as on gRPC', () => {
  it('right key: 200 over the channel; wrong or no key: the same refusal as over gRPC', async () => {
    const sock = path.join(dir, 'locked.sock');
    locked = await startTestEngine({
      modelRepository: repo,
      httpPort: -1,
      metricsPort: -1,
      localSocket: sock,
      grpcRestricted: parseRestrictedFeatures(['inference:lc-key=open-sesame'], 'grpc-restricted-protocol'),
    });
    const c = CASES[0]!;
    for (const [key, name] of [
      ['lc-key=open-sesame', 'r'],
      ['lc-key=wrong', 'w'],
      [undefined, 'n'],
    ] as const) {
      const env: Record<string, string> = key ? { GATEWAY_ENGINE_KEY: key } : {};
      const l = await gateway(locked, sock, `${name}l`, env);
      const g = await gateway(locked, undefined, `${name}g`, env);
      // The channel opens whatever the key (the check is per call, as gRPC's): wait until it carries calls.
      await waitFor('the channel to carry a call', async () => (await send(l.port, c[1], c[2], c[3])) && l.engine.localCalls > 0);
      const [a, b] = [await send(l.port, c[1], c[2], c[3]), await send(g.port, c[1], c[2], c[3])];
      expect(a).toEqual(b);
      expect(a.status).toBe(key === 'lc-key=open-sesame' ? 200 : 503);
    }
  });
});

describe('L0_local_channel: engine restart', () => {
  it('calls fail as over gRPC while the engine is down and go over the channel again once it is back', async () => {
    const sock = path.join(dir, 'restart.sock');
    const grpcPort = await freePort();
    const start = () => startTestEngine({ modelRepository: repo, grpcPort, httpPort: -1, metricsPort: -1, localSocket: sock });
    let e = await start();
    try {
      const l = await gateway(e, sock, 'xl');
      const g = await gateway(e, undefined, 'xg');
      const c = CASES[0]!;
      await waitFor(
        'the channel to carry a call',
        async () => (await send(l.port, c[1], c[2], c[3])).status === 200 && l.engine.localCalls > 0,
      );
      await e.stop();
      expect(fs.existsSync(sock)).toBe(false);
      const [a, b] = [await send(l.port, c[1], c[2], c[3]), await send(g.port, c[1], c[2], c[3])];
      expect(a).toEqual(b);
      expect(a.status).toBe(503);
      e = await start();
      const before = l.engine.localCalls;
      await waitFor(
        'the channel to reconnect',
        async () => (await send(l.port, c[1], c[2], c[3])).status === 200 && l.engine.localCalls > before,
        15_000,
        100,
      );
    } finally {
      await e.stop();
    }
  }, 60_000);
});
