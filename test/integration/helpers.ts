// Shared helpers for engine integration suites: temp repositories, one real
// engine per suite on port 0, a gRPC client built the way an unmodified
// Triton-generated client sees the server (@grpc/proto-loader from the .proto
// files, no project code), and small tensor/HTTP helpers.
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { startEngine, type EngineOptions, type RunningEngine } from '../../engine/server/server.ts';
import { ENGINE_TRANSPORT_ENV, REMOVED_TRANSPORT_ENV } from '../../engine/frontends/transport-options.ts';
import { writeTestRepository } from '../fixtures/test-models.ts';
import { freePort } from '../fixtures/net.ts';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const PROTOCOL_DIR = path.join(ROOT, 'protocol');
export const BUNDLED_REPO = path.join(ROOT, 'model_repository');

/** A fresh temp dir holding the named test models (test/fixtures/test-models.ts) and bundled models. */
export function tempRepo(prefix: string, testModels: string[] = [], bundledModels: string[] = []): string {
  const repo = writeTestRepository(mkdtempSync(path.join(os.tmpdir(), `${prefix}-`)), testModels);
  for (const m of bundledModels) cpSync(path.join(BUNDLED_REPO, m), path.join(repo, m), { recursive: true });
  return repo;
}

export function removeDir(dir: string | undefined): void {
  if (dir) rmSync(dir, { recursive: true, force: true });
}

/** Start the real engine on 127.0.0.1 with every frontend on a free port. */
export function startTestEngine(opts: Partial<EngineOptions> & { modelRepository: string }): Promise<RunningEngine> {
  // Only the engine's option parsing reads these (issue 38): set here they would silently change nothing.
  const stray = [...Object.values(ENGINE_TRANSPORT_ENV), ...REMOVED_TRANSPORT_ENV].filter((v) => process.env[v] !== undefined);
  if (stray.length) throw new Error(`${stray.join(', ')} set in a test: pass startTestEngine({ transport: {...} }) instead`);
  return startEngine({ grpcPort: 0, httpPort: 0, metricsPort: 0, host: '127.0.0.1', allowClientShm: true, ...opts });
}

export { freePort };

// ---- gRPC through @grpc/proto-loader: what a generated Triton client sees ----

type AnyMsg = Record<string, any>;

/** A client of inference.GRPCInferenceService + grpc.health.v1.Health, loaded from the .proto files only. */
export interface ProtoClient {
  /** Call a unary RPC by its proto name, e.g. call('ServerLive', {}). */
  call<T = AnyMsg>(method: string, request: AnyMsg, deadlineMs?: number): Promise<T>;
  health(service?: string): Promise<AnyMsg>;
  /** The raw generated client (for streams). */
  raw: grpc.Client & AnyMsg;
  close(): void;
}

const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  includeDirs: [PROTOCOL_DIR],
};
const CHANNEL_OPTIONS = { 'grpc.max_receive_message_length': -1, 'grpc.max_send_message_length': -1 };

let loaded: AnyMsg | undefined;
function packages(): AnyMsg {
  loaded ??= grpc.loadPackageDefinition(protoLoader.loadSync(['grpc_service.proto', 'health.proto'], LOADER_OPTIONS));
  return loaded;
}

function unaryCall<T>(client: AnyMsg, method: string, request: AnyMsg, deadlineMs: number): Promise<T> {
  return new Promise((resolve, reject) => {
    client[method](request, { deadline: Date.now() + deadlineMs }, (err: grpc.ServiceError | null, res: T) =>
      err ? reject(err) : resolve(res),
    );
  });
}

export function protoLoaderClient(port: number): ProtoClient {
  const pkgs = packages();
  const address = `127.0.0.1:${port}`;
  const creds = grpc.credentials.createInsecure();
  const raw = new pkgs.inference.GRPCInferenceService(address, creds, CHANNEL_OPTIONS);
  const health = new pkgs.grpc.health.v1.Health(address, creds);
  return {
    raw,
    call: (method, request, deadlineMs = 30_000) => unaryCall(raw, method, request, deadlineMs),
    health: (service = '') => unaryCall(health, 'Check', { service }, 10_000),
    close: () => {
      raw.close();
      health.close();
    },
  };
}

/** The gRPC status code of a rejected call (undefined if it was not a gRPC error). */
export async function grpcError(p: Promise<unknown>): Promise<{ code: number; details: string }> {
  try {
    await p;
  } catch (err) {
    const e = err as grpc.ServiceError;
    return { code: e.code, details: e.details };
  }
  throw new Error('expected the call to fail, it succeeded');
}

// ---- HTTP ----

export async function httpJson(port: number, method: string, p: string, body?: unknown): Promise<{ status: number; json: AnyMsg }> {
  const r = await fetch(`http://127.0.0.1:${port}${p}`, {
    method,
    headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, json: text ? (JSON.parse(text) as AnyMsg) : {} };
}

// ---- tensors ----

export const f32Bytes = (v: ArrayLike<number>): Buffer => Buffer.from(Float32Array.from(v).buffer);
export const i32Bytes = (v: ArrayLike<number>): Buffer => Buffer.from(Int32Array.from(v).buffer);

/** A ModelInfer request for the bundled `simple` model: INPUT0 all 1s, INPUT1 all 2s, shape [1, 16]. */
export const SIMPLE_INFER_REQUEST = {
  model_name: 'simple',
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16] },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
  ],
  raw_input_contents: [i32Bytes(Array(16).fill(1)), i32Bytes(Array(16).fill(2))],
};
/** Copy first: received buffers may be unaligned views. */
export const toF32 = (u: Uint8Array): Float32Array => new Float32Array(Uint8Array.from(u).buffer);
export const toI32 = (u: Uint8Array): Int32Array => new Int32Array(Uint8Array.from(u).buffer);

/** Deterministic pseudo-random floats in [lo, hi). */
export function seededFloats(n: number, seed: number, lo = -1, hi = 1): Float32Array {
  let s = seed >>> 0 || 1;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    out[i] = lo + ((s >>> 0) / 2 ** 32) * (hi - lo);
  }
  return out;
}

export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) return Infinity;
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

/** Triton's BYTES wire form: each element as 4-byte little-endian length + bytes. */
export function encodeBytesTensor(items: (string | Uint8Array)[]): Buffer {
  return Buffer.concat(
    items.flatMap((s) => {
      const b = typeof s === 'string' ? Buffer.from(s) : Buffer.from(s);
      const len = Buffer.alloc(4);
      len.writeUInt32LE(b.length);
      return [len, b];
    }),
  );
}

export function decodeBytesTensor(u: Uint8Array): Buffer[] {
  const b = Buffer.from(u.buffer, u.byteOffset, u.byteLength);
  const out: Buffer[] = [];
  for (let off = 0; off < b.length; ) {
    const n = b.readUInt32LE(off);
    out.push(b.subarray(off + 4, off + 4 + n));
    off += 4 + n;
  }
  return out;
}
