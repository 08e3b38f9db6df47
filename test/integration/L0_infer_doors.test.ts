// Every door into the engine answers a ModelInfer alike (issue 38 "fewer
// doors", docs/architecture.md#doors-into-the-engine): one table of cases
// (plain tensors, BYTES, shm input and output, unknown model, bad shape, bad
// datatype) sent through the gRPC port (TCP and the Unix socket on the own
// HTTP/2 front, and TCP on node:http2 in an engine started with
// --grpc-front=grpc-js), the HTTP port (JSON, plain and complete,
// so on the strict HTTP/1.1 front) and the local channel. Each answer is
// reduced to what a client sees (outputs as names, datatypes, shapes and
// values, shm outputs read back from the region; errors as the Triton status
// code and the message), and every door's must equal the gRPC port's.
import path from 'node:path';
import os from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TritonGrpcClient, type ModelInferRequest, type ModelInferResponse } from '../../client/grpc-client.ts';
import {
  createSharedMemoryRegion,
  destroySharedMemoryRegion,
  getBytesElements,
  getContents,
  serializeBytesTensor,
  type ShmRegionHandle,
} from '../../client/shared-memory.ts';
import type { RunningEngine } from '../../engine/server/server.ts';
import { removeDir, startTestEngine, tempRepo } from './helpers.ts';
import { waitFor } from './L0_gateway-support.ts';

type Value = number | string;
interface TensorCase {
  name: string;
  datatype: string;
  shape: number[];
  data: Value[];
  /** Sent in this registered region at this offset instead of inline. */
  shm?: { region: string; offset: number };
}
interface Case {
  model: string;
  inputs: TensorCase[];
  /** Outputs asked for; `shm` puts one in a registered region. */
  outputs?: Array<{ name: string; shm?: { region: string; offset: number; byteSize: number } }>;
}
/** What a client sees of one answer. */
type Seen =
  | { outputs: Array<{ name: string; datatype: string; shape: number[]; data: Value[] }> }
  | { error: { code: string; message: string } };

const SUFFIX = `${process.pid}_doors`;
const IN_REGION = `doors_in_${process.pid}`;
const OUT_REGION = `doors_out_${process.pid}`;
const iota = (n: number, f: (i: number) => number) => Array.from({ length: n }, (_, i) => f(i));
const A = iota(16, (i) => i);
const B = iota(16, (i) => 100 - i * 3);

const CASES: Array<[string, Case]> = [
  [
    'plain INT32 tensors',
    {
      model: 'simple',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: A },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: B },
      ],
    },
  ],
  [
    'BYTES tensors',
    { model: 'identity_bytes', inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [3], data: ['door', '', 'ünïcode ✓'] }] },
  ],
  [
    'inputs in shm, one output into shm',
    {
      model: 'simple',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: A, shm: { region: IN_REGION, offset: 0 } },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: B, shm: { region: IN_REGION, offset: 64 } },
      ],
      outputs: [{ name: 'OUTPUT0', shm: { region: OUT_REGION, offset: 0, byteSize: 64 } }, { name: 'OUTPUT1' }],
    },
  ],
  ['unknown model', { model: 'no_such_model', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: A }] }],
  [
    'bad shape',
    {
      model: 'simple',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 15], data: A.slice(0, 15) },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 15], data: B.slice(0, 15) },
      ],
    },
  ],
  [
    'bad datatype',
    {
      model: 'simple',
      inputs: [
        { name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: A },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: B },
      ],
    },
  ],
];

// ---- the case as each protocol spells it ----

const rawBytes = (t: TensorCase): Uint8Array =>
  t.datatype === 'BYTES'
    ? serializeBytesTensor(t.data as string[])
    : t.datatype === 'FP32'
      ? new Uint8Array(new Float32Array(t.data as number[]).buffer)
      : new Uint8Array(new Int32Array(t.data as number[]).buffer);

const shmParams = (region: string, byteSize: number, offset: number) => ({
  shared_memory_region: { string_param: region },
  shared_memory_byte_size: { int64_param: byteSize },
  ...(offset ? { shared_memory_offset: { int64_param: offset } } : {}),
});

function grpcRequest(c: Case): ModelInferRequest {
  const inline = c.inputs.filter((t) => !t.shm);
  return {
    model_name: c.model,
    inputs: c.inputs.map((t) => ({
      name: t.name,
      datatype: t.datatype,
      shape: t.shape,
      ...(t.shm ? { parameters: shmParams(t.shm.region, rawBytes(t).byteLength, t.shm.offset) } : {}),
    })),
    outputs: c.outputs?.map((o) => ({
      name: o.name,
      ...(o.shm ? { parameters: shmParams(o.shm.region, o.shm.byteSize, o.shm.offset) } : {}),
    })),
    raw_input_contents: inline.map(rawBytes),
  } as unknown as ModelInferRequest;
}

function httpBody(c: Case): object {
  return {
    inputs: c.inputs.map((t) =>
      t.shm
        ? { name: t.name, datatype: t.datatype, shape: t.shape, parameters: plainShm(t.shm.region, rawBytes(t).byteLength, t.shm.offset) }
        : { name: t.name, datatype: t.datatype, shape: t.shape, data: t.data },
    ),
    ...(c.outputs
      ? {
          outputs: c.outputs.map((o) => ({
            name: o.name,
            ...(o.shm ? { parameters: plainShm(o.shm.region, o.shm.byteSize, o.shm.offset) } : {}),
          })),
        }
      : {}),
  };
}
const plainShm = (region: string, byteSize: number, offset: number) => ({
  shared_memory_region: region,
  shared_memory_byte_size: byteSize,
  ...(offset ? { shared_memory_offset: offset } : {}),
});

// ---- what a client sees ----

const GRPC_CODE: Record<number, string> = { 3: 'INVALID_ARG', 5: 'NOT_FOUND', 13: 'INTERNAL', 14: 'UNAVAILABLE', 12: 'UNSUPPORTED' };
/** Triton's HTTP mapping (engine/api/status.ts httpStatusOf), read backwards for the codes these cases can give. */
const HTTP_CODE: Record<number, string> = { 400: 'INVALID_ARG', 404: 'NOT_FOUND', 500: 'INTERNAL', 503: 'UNAVAILABLE', 501: 'UNSUPPORTED' };

let outRegion: ShmRegionHandle;

function decode(datatype: string, shape: number[], bytes: Uint8Array): Value[] {
  if (datatype === 'BYTES') {
    const out: string[] = [];
    const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    for (let at = 0; at < bytes.byteLength; ) {
      const n = v.getUint32(at, true);
      out.push(Buffer.from(bytes.subarray(at + 4, at + 4 + n)).toString('utf8'));
      at += 4 + n;
    }
    return out;
  }
  const copy = Uint8Array.from(bytes);
  return Array.from(datatype === 'FP32' ? new Float32Array(copy.buffer) : new Int32Array(copy.buffer)).slice(
    0,
    shape.reduce((a, b) => a * b, 1),
  );
}

/** A shm output's values, read from the region (then cleared for the next door). */
function fromRegion(c: Case, name: string, datatype: string, shape: number[]): Value[] | undefined {
  const o = c.outputs?.find((x) => x.name === name)?.shm;
  if (!o) return undefined;
  const v =
    datatype === 'BYTES'
      ? getBytesElements(outRegion, shape, o.offset).map((b) => Buffer.from(b).toString('utf8'))
      : Array.from(getContents(outRegion, datatype, shape, o.offset) as Int32Array);
  outRegion.bytes.fill(0, o.offset, o.offset + o.byteSize);
  return v;
}

function seenGrpc(c: Case, res: ModelInferResponse): Seen {
  const raw = res.raw_output_contents ?? [];
  return {
    outputs: res.outputs
      .map((o, i) => {
        const shape = o.shape.map(Number);
        return {
          name: o.name,
          datatype: o.datatype,
          shape,
          data: fromRegion(c, o.name, o.datatype, shape) ?? decode(o.datatype, shape, raw[i]!),
        };
      })
      .sort((a, b) => a.name.localeCompare(b.name)),
  };
}

const seenGrpcError = (err: { code?: number; details?: string }): Seen => ({
  error: { code: GRPC_CODE[err.code!] ?? `grpc ${err.code}`, message: err.details ?? '' },
});

async function viaGrpc(client: TritonGrpcClient, c: Case): Promise<Seen> {
  try {
    return seenGrpc(c, await client.modelInfer(grpcRequest(c), { timeoutMs: 10_000 }));
  } catch (err) {
    return seenGrpcError(err as { code?: number; details?: string });
  }
}

async function viaHttp(port: number, c: Case): Promise<Seen> {
  const r = await fetch(`http://127.0.0.1:${port}/v2/models/${c.model}/infer`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(httpBody(c)),
  });
  const json = (await r.json()) as { error?: string; outputs?: Array<{ name: string; datatype: string; shape: number[]; data?: Value[] }> };
  if (r.status !== 200) return { error: { code: HTTP_CODE[r.status] ?? `http ${r.status}`, message: json.error ?? '' } };
  return {
    outputs: json
      .outputs!.map((o) => ({
        name: o.name,
        datatype: o.datatype,
        shape: o.shape.map(Number),
        data: fromRegion(c, o.name, o.datatype, o.shape.map(Number)) ?? o.data!,
      }))
      .sort((a, b) => a.name.localeCompare(b.name)),
  };
}

// ---- the doors ----

let repo: string;
let engine: RunningEngine;
/** The same repository in an engine whose gRPC port is node:http2 (`--grpc-front=grpc-js`). */
let onNodeHttp2: RunningEngine;
let inRegion: ShmRegionHandle;
const grpcSock = path.join(os.tmpdir(), `doors-${SUFFIX}-grpc.sock`);
const localSock = path.join(os.tmpdir(), `doors-${SUFFIX}-local.sock`);
const clients: TritonGrpcClient[] = [];
let tcp: TritonGrpcClient;
let unix: TritonGrpcClient;
let local: TritonGrpcClient;
let nodeTcp: TritonGrpcClient;

beforeAll(async () => {
  repo = tempRepo('l0-doors', ['simple', 'identity_bytes']);
  engine = await startTestEngine({ modelRepository: repo, grpcUnixSocket: grpcSock, localSocket: localSock });
  onNodeHttp2 = await startTestEngine({ modelRepository: repo, transport: { grpcFront: 'grpc-js' } });
  tcp = new TritonGrpcClient(`127.0.0.1:${engine.grpcPort}`, { directInfer: true });
  nodeTcp = new TritonGrpcClient(`127.0.0.1:${onNodeHttp2.grpcPort}`, { directInfer: true });
  unix = new TritonGrpcClient(`unix:${grpcSock}`, { directInfer: true });
  // Pointed at no gRPC port that answers: a call that missed the channel would fail, not pass unseen.
  local = new TritonGrpcClient('127.0.0.1:9', { localSocket: localSock, localChannel: { retryMs: 50 } });
  clients.push(tcp, unix, local, nodeTcp);
  inRegion = createSharedMemoryRegion(IN_REGION, `/${IN_REGION}`, 128);
  outRegion = createSharedMemoryRegion(OUT_REGION, `/${OUT_REGION}`, 64);
  inRegion.bytes.set(new Uint8Array(new Int32Array(A).buffer), 0);
  inRegion.bytes.set(new Uint8Array(new Int32Array(B).buffer), 64);
  await tcp.systemSharedMemoryRegister(IN_REGION, `/${IN_REGION}`, 128);
  await tcp.systemSharedMemoryRegister(OUT_REGION, `/${OUT_REGION}`, 64);
  await nodeTcp.systemSharedMemoryRegister(IN_REGION, `/${IN_REGION}`, 128);
  await nodeTcp.systemSharedMemoryRegister(OUT_REGION, `/${OUT_REGION}`, 64);
  await waitFor('the local channel to open', () => local.local!.usable(1));
}, 60_000);

afterAll(async () => {
  for (const c of clients) c.close();
  await engine?.stop();
  await onNodeHttp2?.stop();
  if (inRegion) destroySharedMemoryRegion(inRegion);
  if (outRegion) destroySharedMemoryRegion(outRegion);
  removeDir(repo);
});

const DOORS: Array<[string, (c: Case) => Promise<Seen>]> = [
  ['gRPC port, Unix socket (own HTTP/2 front)', (c) => viaGrpc(unix, c)],
  ['gRPC port over TCP on node:http2 (--grpc-front=grpc-js)', (c) => viaGrpc(nodeTcp, c)],
  ['HTTP port (JSON, HTTP/1.1 front)', (c) => viaHttp(engine.httpPort, c)],
  ['local channel', (c) => viaGrpc(local, c)],
];

describe('L0_infer_doors', () => {
  for (const [name, c] of CASES) {
    it(`${name}: every door answers as the gRPC port over TCP (own HTTP/2 front)`, async () => {
      const want = await viaGrpc(tcp, c);
      // The reference answer itself is what the case is about.
      if (name.startsWith('unknown') || name.startsWith('bad')) expect(want).toHaveProperty('error');
      else expect(want).toHaveProperty('outputs');
      for (const [door, send] of DOORS) expect(await send(c), door).toEqual(want);
    });
  }

  it('the local channel carried its calls (not gRPC)', () => {
    expect(local.local!.calls).toBeGreaterThanOrEqual(CASES.length);
  });
});
