// Every HTTP infer form, answered as Triton's HTTP server writes it (server
// src/http_server.cc FinalizeResponse, SetResponseHeader) and read back by
// what Triton's C++ client does (test/fixtures/triton-http-client.ts, from
// client/src/c++/library/http_client.cc) and, for JSON outputs the C++
// client never asks for, by the Python client's rule (an output's bytes come
// from the tail when its parameters carry binary_data_size, else `data`).
// Forms: JSON data, the binary extension (binary_data_size), shm inputs and
// outputs, classification (binary and JSON), BYTES, mixed outputs, the
// binary_data_output default, zero-byte outputs, errors, and the
// Inference-Header-Content-Length header both ways.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import {
  createSharedMemoryRegion,
  destroySharedMemoryRegion,
  getContents,
  listSharedMemoryKeys,
  setSharedMemoryRegion,
  type ShmRegionHandle,
} from '../../client/shared-memory.ts';
import { writeModel } from '../fixtures/test-models.ts';
import {
  cppInferRequest,
  cppInferResult,
  post,
  type CppInput,
  type CppOptions,
  type CppOutput,
  type RawReply,
} from '../fixtures/triton-http-client.ts';
import { encodeBytesTensor, httpJson, i32Bytes, removeDir, startTestEngine, tempRepo } from './helpers.ts';

const PREFIX = `/l0httpforms${process.pid}_`;
const A = Array.from({ length: 16 }, (_, i) => i);
const B = Array.from({ length: 16 }, (_, i) => 3 * i - 7);
const SUM = A.map((x, i) => x + B[i]!);
const DIFF = A.map((x, i) => x - B[i]!);

// Passes its FP32 input through; its output names a label file (Triton's classification extension).
const JS_SCORES = `export async function execute(requests: Array<{ inputs: Record<string, { datatype: string; shape: number[]; data: Uint8Array }> }>) {
  return requests.map((r) => ({ outputs: { OUT: { ...r.inputs.IN!, data: Uint8Array.from(r.inputs.IN!.data) } } }));
}
`;
const SCORES_CONFIG = `name: "js_scores"
backend: "js"
default_model_filename: "model.ts"
max_batch_size: 8
input [ { name: "IN", data_type: TYPE_FP32, dims: [ 4 ] } ]
output [ { name: "OUT", data_type: TYPE_FP32, dims: [ 4 ], label_filename: "labels.txt" } ]
`;

let repo: string;
let engine: RunningEngine;
let port: number;
const regions: ShmRegionHandle[] = [];

beforeAll(async () => {
  repo = tempRepo('l0-http-forms', ['simple', 'identity_bytes', 'js_echo']);
  writeModel(repo, 'js_scores', SCORES_CONFIG, { 'model.ts': JS_SCORES });
  writeFileSync(path.join(repo, 'js_scores', 'labels.txt'), 'cat\ndog\nbird\nfish\n');
  engine = await startTestEngine({ modelRepository: repo });
  port = engine.httpPort;
});
afterEach(async () => {
  for (const h of regions.splice(0)) destroySharedMemoryRegion(h);
  await httpJson(port, 'POST', '/v2/systemsharedmemory/unregister');
});
afterAll(async () => {
  await engine?.stop();
  removeDir(repo);
  expect(listSharedMemoryKeys(PREFIX)).toEqual([]);
});

async function cpp(o: CppOptions, inputs: CppInput[], outputs: CppOutput[]) {
  const r = cppInferRequest(o, inputs, outputs);
  const reply = await post(port, r.path, r.headers, r.body);
  return { reply, result: cppInferResult(reply) };
}

/** A plain JSON request, as a curl user or the Python client with binary_data=False sends it. */
async function postJson(model: string, doc: unknown, extra: Record<string, string> = {}): Promise<RawReply> {
  const body = Buffer.from(JSON.stringify(doc));
  return post(
    port,
    `/v2/models/${model}/infer`,
    { 'Content-Type': 'application/json', 'Content-Length': String(body.length), ...extra },
    body,
  );
}

/** The Python client's InferResult: header length, then per output bytes from the tail or `data` from the JSON. */
function pythonRead(reply: RawReply): { json: any; tensor(name: string): Buffer | unknown[] } {
  const hdr = reply.headers['inference-header-content-length'];
  const n = hdr === undefined ? reply.body.length : Number(hdr);
  const json = JSON.parse(reply.body.subarray(0, n).toString());
  const tail = new Map<string, Buffer>();
  let at = n;
  for (const o of json.outputs ?? []) {
    const size = o.parameters?.binary_data_size;
    if (size !== undefined) {
      tail.set(o.name, reply.body.subarray(at, at + size));
      at += size;
    }
  }
  expect(at).toBe(reply.body.length); // every tail byte belongs to an output
  return { json, tensor: (name) => tail.get(name) ?? json.outputs.find((o: { name: string }) => o.name === name).data };
}

const ints = (b: Buffer) => Array.from(new Int32Array(Uint8Array.from(b).buffer));
const shmRegion = (name: string, bytes: number) => {
  const h = createSharedMemoryRegion(name, `${PREFIX}${name}`, bytes);
  regions.push(h);
  return h;
};
const register = (name: string, bytes: number) =>
  httpJson(port, 'POST', `/v2/systemsharedmemory/region/${name}/register`, { key: `${PREFIX}${name}`, offset: 0, byte_size: bytes });

describe('L0_http_output_forms', () => {
  it("binary extension both ways (the C++ client's form): octet-stream with the JSON header length, outputs read from the tail", async () => {
    const { reply, result } = await cpp(
      { model: 'simple', requestId: 'r7' },
      [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: i32Bytes(A) },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: i32Bytes(B) },
      ],
      [{ name: 'OUTPUT0' }, { name: 'OUTPUT1' }],
    );
    expect(result.error).toBeUndefined();
    expect(reply.headers['content-type']).toBe('application/octet-stream');
    const headerLength = Number(reply.headers['inference-header-content-length']);
    expect(reply.body.length).toBe(headerLength + 2 * 64);
    expect(result.json).toEqual({
      id: 'r7',
      model_name: 'simple',
      model_version: '1',
      outputs: [
        { name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
        { name: 'OUTPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
      ],
    });
    expect(ints(result.rawData('OUTPUT0'))).toEqual(SUM);
    expect(ints(result.rawData('OUTPUT1'))).toEqual(DIFF);
    expect(result.shape('OUTPUT1')).toEqual([1, 16]);
  });

  it('JSON in, JSON out: application/json, no Inference-Header-Content-Length, no parameters on outputs; an empty id is not echoed', async () => {
    const reply = await postJson('simple', {
      id: '',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: A },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: [B] },
      ],
      outputs: [{ name: 'OUTPUT0' }, { name: 'OUTPUT1', parameters: { binary_data: false } }],
    });
    expect(reply.status).toBe(200);
    expect(reply.headers['content-type']).toBe('application/json');
    expect(reply.headers['inference-header-content-length']).toBeUndefined();
    expect(JSON.parse(reply.body.toString())).toEqual({
      model_name: 'simple',
      model_version: '1',
      outputs: [
        { name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16], data: SUM },
        { name: 'OUTPUT1', datatype: 'INT32', shape: [1, 16], data: DIFF },
      ],
    });
    // The C++ client reads it too (no parameters: nothing taken from a tail).
    expect(cppInferResult(reply).error).toBeUndefined();
  });

  it('shm inputs and outputs (perf_analyzer --shared-memory=system): the outputs are name, datatype and shape only, and the C++ client reads the result', async () => {
    const ip = shmRegion('in', 128);
    const op = shmRegion('out', 128);
    setSharedMemoryRegion(ip, [Int32Array.from(A), Int32Array.from(B)]);
    expect((await register('in', 128)).status).toBe(200);
    expect((await register('out', 128)).status).toBe(200);
    const { reply, result } = await cpp(
      { model: 'simple' },
      [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], shm: { region: 'in', byteSize: 64 } },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], shm: { region: 'in', byteSize: 64, offset: 64 } },
      ],
      [
        { name: 'OUTPUT0', shm: { region: 'out', byteSize: 64 } },
        { name: 'OUTPUT1', shm: { region: 'out', byteSize: 64, offset: 64 } },
      ],
    );
    expect(result.error).toBeUndefined();
    expect(reply.headers['content-type']).toBe('application/json');
    expect(reply.headers['inference-header-content-length']).toBeUndefined();
    expect(result.json!.outputs).toEqual([
      { name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16] },
      { name: 'OUTPUT1', datatype: 'INT32', shape: [1, 16] },
    ]);
    expect(Array.from(getContents(op, 'INT32', [16]) as Int32Array)).toEqual(SUM);
    expect(Array.from(getContents(op, 'INT32', [16], 64) as Int32Array)).toEqual(DIFF);
  });

  it('mixed outputs in one reply: shm, binary and JSON; the tail holds only the binary one', async () => {
    const op = shmRegion('out', 64);
    expect((await register('out', 64)).status).toBe(200);
    const reply = await postJson('simple', {
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: A },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: B },
      ],
      outputs: [
        { name: 'OUTPUT0', parameters: { shared_memory_region: 'out', shared_memory_byte_size: 64 } },
        { name: 'OUTPUT1', parameters: { binary_data: true } },
      ],
    });
    expect(reply.status).toBe(200);
    const py = pythonRead(reply);
    expect(py.json.outputs[0]).toEqual({ name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16] });
    expect(ints(py.tensor('OUTPUT1') as Buffer)).toEqual(DIFF);
    expect(Array.from(getContents(op, 'INT32', [16]) as Int32Array)).toEqual(SUM);
    const c = cppInferResult(reply);
    expect(c.error).toBeUndefined();
    expect(ints(c.rawData('OUTPUT1'))).toEqual(DIFF);
    // JSON and binary side by side, binary first in the tail order of the outputs.
    const mixed = pythonRead(
      await postJson('simple', {
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: A },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: B },
        ],
        outputs: [
          { name: 'OUTPUT0', parameters: { binary_data: false } },
          { name: 'OUTPUT1', parameters: { binary_data: true } },
        ],
      }),
    );
    expect(mixed.tensor('OUTPUT0')).toEqual(SUM);
    expect(ints(mixed.tensor('OUTPUT1') as Buffer)).toEqual(DIFF);
  });

  it("binary_data_output: the C++ client naming no outputs gets every output binary; without it JSON; an output's own binary_data wins", async () => {
    const inputs: CppInput[] = [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: i32Bytes(A) },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: i32Bytes(B) },
    ];
    const { result } = await cpp({ model: 'simple' }, inputs, []);
    expect(result.error).toBeUndefined();
    expect(ints(result.rawData('OUTPUT0'))).toEqual(SUM);
    expect(ints(result.rawData('OUTPUT1'))).toEqual(DIFF);
    const json = [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: A },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: B },
    ];
    const plain = pythonRead(await postJson('simple', { inputs: json }));
    expect(plain.json.outputs.map((o: { data?: unknown }) => o.data !== undefined)).toEqual([true, true]);
    const over = pythonRead(
      await postJson('simple', {
        inputs: json,
        parameters: { binary_data_output: true },
        outputs: [{ name: 'OUTPUT0', parameters: { binary_data: false } }, { name: 'OUTPUT1' }],
      }),
    );
    expect(over.tensor('OUTPUT0')).toEqual(SUM);
    expect(ints(over.tensor('OUTPUT1') as Buffer)).toEqual(DIFF);
  });

  it("classification: binary (C++ client) is BYTES [batch, k] of Triton's class strings; JSON carries them in data", async () => {
    const scores = new Float32Array([0.1, 0.7, 0.15, 0.05, 2, 1, 3, 0.5]);
    const { result } = await cpp(
      { model: 'js_scores' },
      [{ name: 'IN', datatype: 'FP32', shape: [2, 4], data: new Uint8Array(scores.buffer) }],
      [{ name: 'OUT', classification: 2 }],
    );
    expect(result.error).toBeUndefined();
    expect(result.datatype('OUT')).toBe('BYTES');
    expect(result.shape('OUT')).toEqual([2, 2]);
    expect(result.stringData('OUT')).toEqual(['0.700000:1:dog', '0.150000:2:bird', '3.000000:2:bird', '2.000000:0:cat']);
    const reply = await postJson('js_scores', {
      inputs: [{ name: 'IN', datatype: 'FP32', shape: [1, 4], data: [0.5, 0.25, 1, 0] }],
      outputs: [{ name: 'OUT', parameters: { classification: 3, binary_data: false } }],
    });
    expect(JSON.parse(reply.body.toString()).outputs).toEqual([
      { name: 'OUT', datatype: 'BYTES', shape: [1, 3], data: ['1.000000:2:bird', '0.500000:0:cat', '0.250000:1:dog'] },
    ]);
  });

  it('BYTES: binary in and out as 4-byte lengths + bytes; JSON strings in and out', async () => {
    const items = ['hello', '', 'ünïcødé', 'x'.repeat(300)];
    const { result } = await cpp(
      { model: 'identity_bytes' },
      [{ name: 'INPUT0', datatype: 'BYTES', shape: [items.length], data: encodeBytesTensor(items) }],
      [{ name: 'OUTPUT0' }],
    );
    expect(result.error).toBeUndefined();
    expect(result.stringData('OUTPUT0')).toEqual(items);
    const reply = await postJson('identity_bytes', {
      inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [2], data: ['a b', 'ç'] }],
      outputs: [{ name: 'OUTPUT0', parameters: { binary_data: false } }],
    });
    expect(JSON.parse(reply.body.toString()).outputs[0]).toEqual({ name: 'OUTPUT0', datatype: 'BYTES', shape: [2], data: ['a b', 'ç'] });
  });

  it("a zero-byte binary output: binary_data_size 0, nothing in the tail; with no tail the reply is JSON without the header, as Triton's", async () => {
    const { reply, result } = await cpp(
      { model: 'js_echo' },
      [{ name: 'INPUT0', datatype: 'FP32', shape: [0], data: new Uint8Array(0) }],
      [{ name: 'OUTPUT0' }],
    );
    expect(result.error).toBeUndefined();
    expect(reply.headers['content-type']).toBe('application/json');
    expect(reply.headers['inference-header-content-length']).toBeUndefined();
    expect(result.json!.outputs).toEqual([{ name: 'OUTPUT0', datatype: 'FP32', shape: [0], parameters: { binary_data_size: 0 } }]);
    expect(result.rawData('OUTPUT0').length).toBe(0);
  });

  it('errors: the status and {"error": text}, which the C++ client reports; triton_ parameters refused with Triton\'s text', async () => {
    const { reply, result } = await cpp(
      { model: 'nope' },
      [{ name: 'X', datatype: 'FP32', shape: [1], data: new Uint8Array(4) }],
      [{ name: 'Y' }],
    );
    expect(reply.status).toBeGreaterThanOrEqual(400);
    expect(reply.headers['content-type']).toBe('application/json');
    expect(result.error).toMatch(/nope/);
    const r = await postJson('simple', {
      parameters: { triton_enable_empty_final_response: true },
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: A },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: B },
      ],
    });
    expect([r.status, JSON.parse(r.body.toString()).error]).toEqual([
      400,
      "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified.",
    ]);
  });

  it('Inference-Header-Content-Length: any letter case; absent means the body is all JSON; past the body is refused', async () => {
    const r = cppInferRequest(
      { model: 'simple' },
      [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: i32Bytes(A) },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: i32Bytes(B) },
      ],
      [{ name: 'OUTPUT0' }],
    );
    const { 'Inference-Header-Content-Length': len, ...rest } = r.headers;
    const lower = await post(port, r.path, { ...rest, 'inference-header-content-length': len! }, r.body);
    expect(ints(cppInferResult(lower).rawData('OUTPUT0'))).toEqual(SUM);
    const json = Buffer.from(
      JSON.stringify({
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: A },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: B },
        ],
      }),
    );
    const whole = await post(port, r.path, { 'Content-Type': 'application/json', 'Content-Length': String(json.length) }, json);
    expect(pythonRead(whole).tensor('OUTPUT0')).toEqual(SUM);
    const past = await post(port, r.path, { ...rest, 'Inference-Header-Content-Length': String(r.body.length + 1) }, r.body);
    expect(past.status).toBe(400);
    expect(JSON.parse(past.body.toString()).error).toMatch(/Inference-Header-Content-Length/);
  });
});
