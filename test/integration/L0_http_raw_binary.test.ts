// Triton's raw binary HTTP request (qa/L0_http/http_test.py; server
// http_server.cc EVBufferToRawInput, core InferenceRequest::Normalize):
// with `Inference-Header-Content-Length: 0` the whole body is the one input
// of a one-input model, its shape deduced from the config (batch 1, one
// variable dim sized from the byte count; BYTES only for dims [1], the body
// becoming its one element), every output returned binary. The QA models
// are identities; here a JS identity under the same configs.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { writeModel } from '../fixtures/test-models.ts';
import { removeDir, startTestEngine, tempRepo } from './helpers.ts';

const IDENTITY_SRC = `type T = { datatype: string; shape: number[]; data: Uint8Array };
export async function execute(requests: Array<{ inputs: Record<string, T> }>) {
  return Promise.all(requests.map(async (r) => {
    const t = Object.values(r.inputs)[0]!;
    if (SLOW_MS > 0) await new Promise((res) => setTimeout(res, SLOW_MS));
    return { outputs: { OUTPUT0: { datatype: t.datatype, shape: [...t.shape], data: Uint8Array.from(t.data) } } };
  }));
}
`;
const IDENTITY = IDENTITY_SRC.replace('type T', 'const SLOW_MS = 0;\ntype T');
const SLOW = IDENTITY_SRC.replace('type T', 'const SLOW_MS = 600;\ntype T');
const config = (name: string, type: string, dims: string, mbs = 8, inputs = 1, extra = '') => `name: "${name}"
backend: "js"
default_model_filename: "model.ts"
max_batch_size: ${mbs}
input [ ${Array.from({ length: inputs }, (_, i) => `{ name: "INPUT${i}", data_type: ${type}, dims: ${dims} }`).join(', ')} ]
output [ { name: "OUTPUT0", data_type: ${type}, dims: ${dims} } ]
${extra}`;

let repo: string;
let engine: RunningEngine;

beforeAll(async () => {
  repo = tempRepo('l0-http-raw');
  writeModel(repo, 'zero_1_float32', config('zero_1_float32', 'TYPE_FP32', '[ -1 ]'), { 'model.ts': IDENTITY });
  writeModel(repo, 'zero_1_object_1_element', config('zero_1_object_1_element', 'TYPE_STRING', '[ 1 ]'), { 'model.ts': IDENTITY });
  writeModel(repo, 'zero_1_object', config('zero_1_object', 'TYPE_STRING', '[ -1 ]'), { 'model.ts': IDENTITY });
  writeModel(repo, 'zero_1_float16', config('zero_1_float16', 'TYPE_FP16', '[ -1, -1 ]'), { 'model.ts': IDENTITY });
  writeModel(repo, 'zero_3_float32', config('zero_3_float32', 'TYPE_FP32', '[ -1 ]', 8, 3), { 'model.ts': IDENTITY });
  writeModel(
    repo,
    'zero_1_float32_queue',
    config(
      'zero_1_float32_queue',
      'TYPE_FP32',
      '[ -1 ]',
      8,
      1,
      'instance_group [ { count: 1, kind: KIND_CPU } ]\ndynamic_batching { default_queue_policy { max_queue_size: 1 } }\n',
    ),
    { 'model.ts': SLOW },
  );
  engine = await startTestEngine({ modelRepository: repo });
});
afterAll(async () => {
  await engine?.stop();
  removeDir(repo);
});

async function raw(model: string, body: Uint8Array, headers: Record<string, string> = {}) {
  const r = await fetch(`http://127.0.0.1:${engine.httpPort}/v2/models/${model}/infer`, {
    method: 'POST',
    headers: { 'Inference-Header-Content-Length': '0', ...headers },
    body,
  });
  return { status: r.status, headers: r.headers, body: Buffer.from(await r.arrayBuffer()) };
}
const f32 = (n: number) => new Uint8Array(Float32Array.from({ length: n }, (_, i) => i).buffer);

describe('L0_http_raw_binary', () => {
  for (const n of [8, 32]) {
    it(`test_raw_binary${n === 32 ? '_longer' : ''}: ${n} floats in, the same bytes after the JSON header out`, async () => {
      const r = await raw('zero_1_float32', f32(n));
      expect(r.status).toBe(200);
      const header = Number(r.headers.get('inference-header-content-length'));
      expect(Buffer.compare(r.body.subarray(header), Buffer.from(f32(n)))).toBe(0);
      expect(JSON.parse(r.body.subarray(0, header).toString()).outputs).toEqual([
        { name: 'OUTPUT0', datatype: 'FP32', shape: [1, n], parameters: { binary_data_size: 4 * n } },
      ]);
    });
  }

  it('test_byte: a BYTES model with dims [1] takes the body as its one element (returned with its 4-byte length)', async () => {
    const r = await raw('zero_1_object_1_element', Buffer.from('427'));
    expect(r.status).toBe(200);
    const header = Number(r.headers.get('inference-header-content-length'));
    expect(r.body.subarray(header + 4).toString()).toBe('427');
    expect(r.body.readUInt32LE(header)).toBe(3);
  });

  it("test_byte_too_many_elements / test_multi_variable_dimensions / test_multi_inputs: Triton's refusals, 400", async () => {
    const bytes = await raw('zero_1_object', Buffer.from('427'));
    expect([bytes.status, JSON.parse(bytes.body.toString()).error]).toEqual([
      400,
      "For BYTE datatype raw input 'INPUT0', the model must have input shape [1]",
    ]);
    const dims = await raw('zero_1_float16', new Uint8Array(8));
    expect([dims.status, JSON.parse(dims.body.toString()).error]).toEqual([
      400,
      "The shape of the raw input 'INPUT0' can not be deduced because there are more than one variable-sized dimension",
    ]);
    const three = await raw('zero_3_float32', f32(24));
    expect([three.status, JSON.parse(three.body.toString()).error]).toEqual([
      400,
      "Raw request must only have 1 input (found 1) to be deduced but got 3 inputs in 'zero_3_float32' model configuration",
    ]);
  });

  it('test_content_encoding_chunked_manually: a raw body sent chunked', async () => {
    const body = Buffer.from(f32(8));
    const reply = await new Promise<Buffer>((resolve, reject) => {
      const s = net.connect(engine.httpPort, '127.0.0.1', () => {
        s.write(
          `POST /v2/models/zero_1_float32/infer HTTP/1.1\r\nHost: x\r\nInference-Header-Content-Length: 0\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n`,
        );
        s.write(Buffer.concat([Buffer.from(`${body.length.toString(16).toUpperCase()}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')]));
      });
      const chunks: Buffer[] = [];
      s.on('data', (c) => chunks.push(c));
      s.on('end', () => resolve(Buffer.concat(chunks)));
      s.on('error', reject);
    });
    const head = reply.subarray(0, reply.indexOf('\r\n\r\n')).toString();
    expect(head).toMatch(/^HTTP\/1\.1 200/);
    expect(Buffer.compare(reply.subarray(reply.length - 32), body)).toBe(0);
  });

  it('test_descriptive_status_code: a raw request finding the queue full is 503', async () => {
    const first = raw('zero_1_float32_queue', f32(8)); // runs
    await new Promise((r) => setTimeout(r, 150));
    const second = raw('zero_1_float32_queue', f32(8)); // waits in the queue of one
    await new Promise((r) => setTimeout(r, 100));
    const third = await raw('zero_1_float32_queue', f32(8));
    expect(third.status).toBe(503);
    expect([(await first).status, (await second).status]).toEqual([200, 200]);
  });
});
