// Helpers for the progressive-delivery and usage-plan suites: a repository
// of small JS models with the same inputs and outputs that differ in speed
// and answer (echo + add after a delay), the function file, admin calls and
// call drivers. Not a test file itself.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { writeModel } from '../fixtures/test-models.ts';
import type { RunningGateway } from '../../gateway/server.ts';

export const TOKEN = 'delivery-admin-token';
type Json = Record<string, any>;

/** A JS model (one execute at a time per instance): OUTPUT0 = INPUT0 + add after delayMs (FP32 [-1], or INT32 with int: true for an IO mismatch). */
export function writeEchoModel(
  repo: string,
  name: string,
  o: { delayMs?: number; add?: number; int?: boolean; instances?: number } = {},
): void {
  const type = o.int ? 'TYPE_INT32' : 'TYPE_FP32';
  const config = `name: "${name}"
backend: "js"
default_model_filename: "model.ts"
max_batch_size: 0
input [ { name: "INPUT0", data_type: ${type}, dims: [ -1 ] } ]
output [ { name: "OUTPUT0", data_type: ${type}, dims: [ -1 ] } ]
instance_group [ { count: ${o.instances ?? 1}, kind: KIND_CPU } ]
`;
  const model = `// ${name}: OUTPUT0 = INPUT0 + ${o.add ?? 0} after ${o.delayMs ?? 0} ms (test/integration/L0_delivery-support.ts).
type T = { datatype: string; shape: number[]; data: Uint8Array };
export async function initialize(): Promise<void> {}
export async function execute(requests: Array<{ inputs: Record<string, T> }>) {
  return Promise.all(requests.map(async (r) => {
    if (${o.delayMs ?? 0} > 0) await new Promise((res) => setTimeout(res, ${o.delayMs ?? 0}));
    const t = r.inputs.INPUT0!;
    const copy = Uint8Array.from(t.data);
    const v = ${o.int ? 'new Int32Array(copy.buffer)' : 'new Float32Array(copy.buffer)'};
    for (let i = 0; i < v.length; i++) v[i] += ${o.add ?? 0};
    return { outputs: { OUTPUT0: { datatype: t.datatype, shape: [...t.shape], data: copy } } };
  }));
}
export async function finalize(): Promise<void> {}
`;
  writeModel(repo, name, config, { 'model.ts': model });
}

/** A folder with one function file: f -> echo_a, x -> INPUT0, y -> OUTPUT0 (plus auth when keyEnv is given). */
export function functionDir(keyEnv?: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-delivery-fn-'));
  const def = {
    name: 'f',
    target: { model: 'echo_a' },
    inputs: { x: 'INPUT0' },
    outputs: { y: 'OUTPUT0' },
    ...(keyEnv ? { auth: { apiKeyEnv: [keyEnv] } } : {}),
  };
  fs.writeFileSync(path.join(dir, 'f.json'), JSON.stringify(def));
  return dir;
}

export const url = (g: RunningGateway, p: string) => `http://127.0.0.1:${g.port}${p}`;

export async function admin(g: RunningGateway, method: string, p: string, body?: unknown): Promise<{ status: number; body: Json }> {
  const r = await fetch(url(g, p), {
    method,
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${TOKEN}` },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, body: (await r.json()) as Json };
}

/** One call of f; resolves with status, the side header and the parsed body. */
export async function callF(g: RunningGateway, headers: Record<string, string> = {}, x = [1, 2, 3, 4]) {
  const t0 = performance.now();
  const r = await fetch(url(g, '/fn/f'), {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: JSON.stringify({ inputs: { x } }),
  });
  const body = (await r.json()) as Json;
  return { status: r.status, side: r.headers.get('x-deploy-side'), headers: r.headers, body, ms: performance.now() - t0 };
}

/** Run `total` calls with `concurrency` workers; each worker i uses gateways[i % gateways.length]. */
export async function drive<T>(total: number, concurrency: number, one: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array(total);
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < total; i = next++) out[i] = await one(i);
    }),
  );
  return out;
}

/** The p-quantile (0-1) of numbers. */
export function quantile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)]!;
}

const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 64 });

/** Close the connections callSide keeps open (before the gateways stop). */
export function closeCallSockets(): void {
  keepAlive.destroy();
}

/**
 * The x-deploy-side of one call of f, as callF makes it but through node:http
 * on kept-alive connections: for the suites that make a thousand calls, where
 * fetch's own work would be most of the client's CPU.
 */
export function callSide(g: RunningGateway, headers: Record<string, string> = {}): Promise<string | null> {
  const body = JSON.stringify({ inputs: { x: [1, 2, 3, 4] } });
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port: g.port,
        path: '/fn/f',
        method: 'POST',
        agent: keepAlive,
        headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), ...headers },
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          const side = res.headers['x-deploy-side'];
          resolve(typeof side === 'string' ? side : null);
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
