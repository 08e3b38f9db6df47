// The servers a bench run measures, each a child process on free ports:
// the engine (bundled repository or a variant), the gateway in front of it,
// and the baseline's one-process-per-model HTTP servers. Also a keep-alive
// HTTP POST helper for the HTTP clients.
import http from 'node:http';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ENGINE_NODE_FLAGS } from '../../engine/node-flags.ts';
import { TritonGrpcClient } from '../../client/grpc-client.ts';
import { freePort, removeTempDir, ROOT, spawnTs, stopChild, trackTempDir, waitUntil, type Child } from './processes.ts';

export const BUNDLED_REPO = path.join(ROOT, 'model_repository');

/** A running engine child, a gRPC client connected to it, and one channel per load client. */
export interface EngineProc {
  child: Child;
  grpcPort: number;
  httpPort: number;
  /** gRPC target of its Unix socket listener (what a colocated gateway uses, as under `npm start`). */
  grpcSocket: string;
  client: TritonGrpcClient;
  /** `n` clients each on its own connection (grpc-js shares one per target unless told not to). */
  channels(n: number): TritonGrpcClient[];
  stop(): Promise<void>;
}

/**
 * Start an engine child. Its ports are picked free a moment before it binds
 * them, so when other test runs share the host one may be taken meanwhile:
 * an engine that exits before it is ready is started once more on fresh ports.
 */
export async function startEngineProc(
  name: string,
  repo: string,
  extraArgs: string[] = [],
  env: Record<string, string> = {},
  attempt = 1,
  nodeFlags: string[] = [],
): Promise<EngineProc> {
  const [grpcPort, httpPort, metricsPort] = [await freePort(), await freePort(), await freePort()];
  const sock = path.join(os.tmpdir(), `bench-${process.pid}-${name}.sock`);
  const child = spawnTs(
    name,
    'engine/main.ts',
    [
      `--grpc-unix-socket=${sock}`,
      `--model-repository=${repo}`,
      `--grpc-port=${grpcPort}`,
      `--http-port=${httpPort}`,
      `--metrics-port=${metricsPort}`,
      '--http-address=127.0.0.1',
      '--allow-client-shm=true',
      ...extraArgs,
    ],
    env,
    [...ENGINE_NODE_FLAGS, ...nodeFlags],
  );
  const client = new TritonGrpcClient(`127.0.0.1:${grpcPort}`);
  try {
    await waitUntil(child, async () => (await client.serverReady({ timeoutMs: 1000 })).ready, 60_000);
  } catch (e) {
    client.close();
    await stopChild(child);
    if (attempt === 1 && child.proc.exitCode !== null) return startEngineProc(name, repo, extraArgs, env, 2, nodeFlags);
    throw e;
  }
  const pool: TritonGrpcClient[] = [];
  return {
    child,
    grpcPort,
    httpPort,
    grpcSocket: `unix:${sock}`,
    client,
    channels: (n) => {
      while (pool.length < n)
        pool.push(new TritonGrpcClient(`127.0.0.1:${grpcPort}`, { channelOptions: { 'grpc.use_local_subchannel_pool': 1 } }));
      return pool.slice(0, n);
    },
    stop: async () => {
      client.close();
      for (const c of pool) c.close();
      await stopChild(child);
    },
  };
}

/**
 * A temp copy of the bundled repository whose named models have no
 * dynamic_batching block: every request runs alone. The caller removes it.
 * It lives under node_modules/.cache (ignored by git) rather than the OS temp
 * dir so the JS model's own imports (sharp) still resolve from the project.
 */
export function unbatchedRepository(models: string[]): string {
  const parent = path.join(ROOT, 'node_modules', '.cache', 'tritonish-bench');
  mkdirSync(parent, { recursive: true });
  const dir = trackTempDir(mkdtempSync(path.join(parent, 'nobatch-')));
  cpSync(BUNDLED_REPO, dir, { recursive: true });
  for (const m of models) {
    const file = path.join(dir, m, 'config.pbtxt');
    const text = readFileSync(file, 'utf8');
    const stripped = stripBlock(text, 'dynamic_batching');
    if (stripped === text) throw new Error(`${file}: no dynamic_batching block to remove`);
    writeFileSync(file, stripped);
  }
  return dir;
}

/** Remove `name { ... }` (balanced braces) from a config.pbtxt text. */
export function stripBlock(text: string, name: string): string {
  const at = text.search(new RegExp(`^\\s*${name}\\s*\\{`, 'm'));
  if (at < 0) return text;
  let i = text.indexOf('{', at);
  let depth = 0;
  for (; i < text.length; i++) {
    if (text[i] === '{') depth++;
    else if (text[i] === '}' && --depth === 0) break;
  }
  return text.slice(0, at) + text.slice(i + 1);
}

export function removeDir(dir: string): void {
  removeTempDir(dir);
}

/** A running gateway child. */
export interface GatewayProc {
  child: Child;
  port: number;
  stop(): Promise<void>;
}

/** The API key the bench gives the gateway for product_recommender. */
export const BENCH_API_KEY = 'bench-key';

/**
 * A gateway child in front of `engine` (a gRPC target: `host:port` or `unix:/path`); `script` is
 * its entry, relative to the repository (another build's `main.js` for an A/B of code).
 */
export async function startGatewayProc(
  name: string,
  engine: string,
  extraArgs: string[] = [],
  nodeFlags: string[] = [],
  script = 'gateway/main.ts',
): Promise<GatewayProc> {
  const port = await freePort();
  const env: Record<string, string> = { RECOMMENDER_API_KEYS: BENCH_API_KEY, REDIS_URL: '' };
  const child = spawnTs(
    name,
    script,
    [
      `--port=${port}`,
      '--host=127.0.0.1',
      `--engine=${engine}`,
      '--functions=functions',
      `--prefix=bench${process.pid}${name.replace(/[^a-z0-9]/gi, '')}`,
      ...extraArgs,
    ],
    env,
    nodeFlags,
  );
  await waitUntil(child, async () => (await httpRequest(port, 'GET', '/readyz')).status === 200, 30_000).catch(async (e) => {
    await stopChild(child);
    throw e;
  });
  return { child, port, stop: () => stopChild(child) };
}

/** A running baseline model server. */
export interface BaselineProc {
  child: Child;
  port: number;
  stop(): Promise<void>;
}

export async function startBaselineServer(name: string, args: string[]): Promise<BaselineProc> {
  const port = await freePort();
  const child = spawnTs(name, 'test/bench/baseline/model-server.ts', [...args, `--port=${port}`]);
  await waitUntil(child, async () => (await httpRequest(port, 'GET', '/health')).status === 200, 30_000).catch(async (e) => {
    await stopChild(child);
    throw e;
  });
  return { child, port, stop: () => stopChild(child) };
}

// ---- HTTP client ----

const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

export interface HttpReply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** One request over a shared keep-alive agent to 127.0.0.1:port. */
export function httpRequest(
  port: number,
  method: string,
  urlPath: string,
  body?: Buffer | string,
  headers: Record<string, string> = {},
): Promise<HttpReply> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path: urlPath,
        agent,
        headers: body === undefined ? headers : { 'content-length': String(Buffer.byteLength(body)), ...headers },
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (d: Buffer) => parts.push(d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts) }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** POST and fail unless 200; returns the body. */
export async function post(port: number, urlPath: string, body: Buffer | string, headers: Record<string, string>): Promise<HttpReply> {
  const r = await httpRequest(port, 'POST', urlPath, body, headers);
  if (r.status !== 200) throw new Error(`POST ${urlPath} -> ${r.status}: ${r.body.toString('utf8').slice(0, 300)}`);
  return r;
}

export function closeHttpAgent(): void {
  agent.destroy();
}
