// The engine's HTTP/REST frontend and metrics endpoint on the real engine:
// Triton's paths, JSON and binary tensor data, errors, statistics, metrics.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEngine } from '../../engine/server/server.ts';
import { startHttpServer } from '../../engine/frontends/http/http-server.ts';
import type { InferRequest } from '../../engine/api/infer-request.ts';
import type { ServerApi } from '../../engine/api/server-api.ts';
import { cancelled } from '../../engine/api/status.ts';
import { writeTestRepository } from '../fixtures/test-models.ts';

type Engine = Awaited<ReturnType<typeof startEngine>>;
type Json = Record<string, any>;

let engine: Engine;
let repo: string;
let base: string;
/** Successful infers sent to `simple`, to check statistics and metrics. */
let successes = 0;

const A = Array.from({ length: 16 }, (_, i) => i * 3 - 7);
const B = Array.from({ length: 16 }, (_, i) => 100 - i * i);
const sum = A.map((a, i) => a + B[i]!);
const diff = A.map((a, i) => a - B[i]!);
const i32bytes = (v: number[]) => Buffer.from(new Int32Array(v).buffer);
const ints = (u: Uint8Array) => [...new Int32Array(Uint8Array.from(u).buffer)];

async function call(method: string, p: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> {
  const init: RequestInit = { method, headers };
  if (body !== undefined) init.body = typeof body === 'string' || Buffer.isBuffer(body) ? (body as string) : JSON.stringify(body);
  return fetch(`${base}${p}`, init);
}
const jsonOf = async (r: Response): Promise<Json> => (await r.json()) as Json;

function inferBody(inputs: Json[] = [], outputs?: Json[], extra: Json = {}): Json {
  return {
    ...extra,
    inputs: inputs.length
      ? inputs
      : [
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: A },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: [B] },
        ],
    ...(outputs ? { outputs } : {}),
  };
}

async function expectError(r: Response, status: number, ...mentions: string[]): Promise<void> {
  expect(r.status).toBe(status);
  const body = await jsonOf(r);
  expect(typeof body.error).toBe('string');
  for (const m of mentions) expect(body.error).toContain(m);
}

beforeAll(async () => {
  repo = writeTestRepository(mkdtempSync(path.join(os.tmpdir(), 'l0-http-')), ['simple']);
  engine = await startEngine({
    modelRepository: repo,
    controlMode: 'explicit',
    loadModels: ['simple'],
    grpcPort: 0,
    httpPort: 0,
    metricsPort: 0,
    host: '127.0.0.1',
    allowClientShm: true,
  });
  base = `http://127.0.0.1:${engine.httpPort}`;
});

afterAll(async () => {
  await engine?.stop();
  rmSync(repo, { recursive: true, force: true });
});

describe('L0_http', () => {
  it('answers health and server metadata', async () => {
    expect((await call('GET', '/v2/health/live')).status).toBe(200);
    expect((await call('GET', '/v2/health/ready')).status).toBe(200);
    const meta = await jsonOf(await call('GET', '/v2'));
    expect(meta.name).toBe(engine.server.name);
    expect(meta.extensions).toContain('binary_tensor_data');
  });

  it('serves model metadata, readiness and config', async () => {
    for (const p of ['/v2/models/simple', '/v2/models/simple/versions/1']) {
      const meta = await jsonOf(await call('GET', p));
      expect(meta.name).toBe('simple');
      expect(meta.versions).toEqual(['1']);
      expect(meta.inputs).toEqual([
        { name: 'INPUT0', datatype: 'INT32', shape: [-1, 16] },
        { name: 'INPUT1', datatype: 'INT32', shape: [-1, 16] },
      ]);
      expect(meta.outputs.map((o: Json) => o.name)).toEqual(['OUTPUT0', 'OUTPUT1']);
    }
    expect((await call('GET', '/v2/models/simple/ready')).status).toBe(200);
    expect((await call('GET', '/v2/models/simple/versions/1/ready')).status).toBe(200);
    expect((await call('GET', '/v2/models/nope/ready')).status).toBe(400);
    const config = await jsonOf(await call('GET', '/v2/models/simple/config'));
    expect(config.name).toBe('simple');
    expect(config.max_batch_size).toBe(8);
    expect(config.input.map((i: Json) => [i.name, i.data_type, i.dims])).toEqual([
      ['INPUT0', 'TYPE_INT32', [16]],
      ['INPUT1', 'TYPE_INT32', [16]],
    ]);
  });

  it('runs a JSON inference (flat and nested data)', async () => {
    const r = await call('POST', '/v2/models/simple/infer', inferBody([], undefined, { id: 'req-7' }));
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toContain('application/json');
    const body = await jsonOf(r);
    successes++;
    expect(body.model_name).toBe('simple');
    expect(body.model_version).toBe('1');
    expect(body.id).toBe('req-7');
    const out = Object.fromEntries(body.outputs.map((o: Json) => [o.name, o]));
    expect(out.OUTPUT0).toEqual({ name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16], data: sum });
    expect(out.OUTPUT1.data).toEqual(diff);
  });

  it('runs a binary inference: binary inputs, binary outputs', async () => {
    const header = Buffer.from(
      JSON.stringify({
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [2, 16], parameters: { binary_data_size: 128 } },
          { name: 'INPUT1', datatype: 'INT32', shape: [2, 16], parameters: { binary_data_size: 128 } },
        ],
        outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }, { name: 'OUTPUT1' }],
      }),
    );
    const body = Buffer.concat([header, i32bytes([...A, ...B]), i32bytes([...B, ...A])]);
    const r = await call('POST', '/v2/models/simple/versions/1/infer', body, {
      'Inference-Header-Content-Length': String(header.length),
      'Content-Type': 'application/octet-stream',
    });
    expect(r.status).toBe(200);
    successes++;
    const raw = Buffer.from(await r.arrayBuffer());
    const hl = Number(r.headers.get('inference-header-content-length'));
    expect(r.headers.get('content-type')).toBe('application/octet-stream');
    const head = JSON.parse(raw.subarray(0, hl).toString()) as Json;
    expect(head.outputs[0]).toEqual({ name: 'OUTPUT0', datatype: 'INT32', shape: [2, 16], parameters: { binary_data_size: 128 } });
    expect(ints(raw.subarray(hl))).toEqual([...sum, ...sum]);
    // OUTPUT1 was not asked as binary: JSON data.
    expect(head.outputs[1].data).toEqual([...diff, ...diff.map((d) => -d)]);
  });

  it('returns all outputs as binary with binary_data_output, and a requested subset only', async () => {
    const r = await call('POST', '/v2/models/simple/infer', inferBody([], undefined, { parameters: { binary_data_output: true } }));
    successes++;
    const raw = Buffer.from(await r.arrayBuffer());
    const hl = Number(r.headers.get('inference-header-content-length'));
    const head = JSON.parse(raw.subarray(0, hl).toString()) as Json;
    expect(head.outputs.map((o: Json) => o.parameters.binary_data_size)).toEqual([64, 64]);
    expect(ints(raw.subarray(hl))).toEqual([...sum, ...diff]);

    const sub = await jsonOf(await call('POST', '/v2/models/simple/infer', inferBody([], [{ name: 'OUTPUT1' }])));
    successes++;
    expect(sub.outputs).toHaveLength(1);
    expect(sub.outputs[0].name).toBe('OUTPUT1');
    expect(sub.outputs[0].data).toEqual(diff);
  });

  it('rejects bad requests with 400 naming the input, unknown models with 404', async () => {
    const in1 = { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: B };
    await expectError(
      await call('POST', '/v2/models/simple/infer', inferBody([{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: A }, in1])),
      400,
      'INPUT0',
      'FP32',
    );
    await expectError(
      await call(
        'POST',
        '/v2/models/simple/infer',
        inferBody([{ name: 'INPUT0', datatype: 'INT32', shape: [1, 15], data: A.slice(1) }, in1]),
      ),
      400,
      'INPUT0',
    );
    await expectError(
      await call(
        'POST',
        '/v2/models/simple/infer',
        inferBody([{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: A.slice(1) }, in1]),
      ),
      400,
      'INPUT0',
      '15',
    );
    const header = Buffer.from(
      JSON.stringify(
        inferBody([
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: A },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 60 } },
        ]),
      ),
    );
    await expectError(
      await call('POST', '/v2/models/simple/infer', Buffer.concat([header, Buffer.alloc(60)]), {
        'Inference-Header-Content-Length': String(header.length),
      }),
      400,
      'INPUT1',
      '60',
    );
    await expectError(await call('POST', '/v2/models/simple/infer', '{"inputs": [ {'), 400, 'JSON');
    await expectError(
      await call('POST', '/v2/models/simple/infer', inferBody([{ name: 'INPUT0', datatype: 'INT33', shape: [1, 16], data: A }, in1])),
      400,
      'INPUT0',
      'INT33',
    );
    await expectError(await call('POST', '/v2/models/no_such_model/infer', inferBody()), 404, 'no_such_model');
    await expectError(await call('GET', '/v2/models/no_such_model'), 404, 'no_such_model');
    await expectError(await call('GET', '/v2/not/a/route'), 404);
  });

  it('reports statistics after the inferences', async () => {
    const all = await jsonOf(await call('GET', '/v2/models/stats'));
    expect(all.model_stats.map((s: Json) => s.name)).toContain('simple');
    const one = await jsonOf(await call('GET', '/v2/models/simple/versions/1/stats'));
    expect(one.model_stats).toHaveLength(1);
    const s = one.model_stats[0];
    expect(s.version).toBe('1');
    expect(s.inference_stats.success.count).toBe(successes);
    // The binary request had batch 2: one inference per batch row.
    expect(s.inference_count).toBe(successes + 1);
    // Wrong datatype and wrong shape reach the model and fail there; element
    // count, byte size and JSON errors are caught by the frontend first.
    expect(s.inference_stats.fail.count).toBe(2);
    await expectError(await call('GET', '/v2/models/no_such_model/stats'), 404, 'no_such_model');
  });

  it('exposes nv_inference_* metrics with the right counts', async () => {
    const r = await fetch(`http://127.0.0.1:${engine.metricsPort}/metrics`);
    expect(r.status).toBe(200);
    const text = await r.text();
    const line = (m: string) => text.split('\n').find((l) => l.startsWith(`${m}{model="simple",version="1"} `));
    expect(line('nv_inference_count')).toBe(`nv_inference_count{model="simple",version="1"} ${successes + 1}`);
    expect(line('nv_inference_request_success')).toBe(`nv_inference_request_success{model="simple",version="1"} ${successes}`);
    expect(Number(line('nv_inference_request_duration_us')!.split(' ')[1])).toBeGreaterThan(0);
    expect(text).toMatch(/^nv_cpu_memory_total_bytes \d+/m);
  });

  it('serves shared-memory status and log/trace settings', async () => {
    expect(await jsonOf(await call('GET', '/v2/systemsharedmemory/status'))).toEqual([]);
    expect(await jsonOf(await call('GET', '/v2/cudasharedmemory/status'))).toEqual([]);
    await expectError(await call('POST', '/v2/systemsharedmemory/region/r0/register', { offset: 0, byte_size: 64 }), 400, 'key', 'r0');
    expect((await call('POST', '/v2/systemsharedmemory/unregister')).status).toBe(200);
    const logs = await jsonOf(await call('GET', '/v2/logging'));
    expect(typeof logs.log_verbose_level).toBe('number');
    const trace = await jsonOf(await call('POST', '/v2/models/simple/trace/setting', { trace_rate: '7' }));
    expect(trace.trace_rate).toBe('7');
    expect(Array.isArray(trace.trace_level)).toBe(true);
    expect((await jsonOf(await call('GET', '/v2/trace/setting'))).trace_rate).not.toBe('7');
  });

  it('lists the repository index and unloads/loads a model', async () => {
    const index = await jsonOf(await call('POST', '/v2/repository/index'));
    expect(index).toContainEqual(expect.objectContaining({ name: 'simple', version: '1', state: 'READY' }));
    expect(await jsonOf(await call('POST', '/v2/repository/index', { ready: true }))).toHaveLength(1);
    expect((await call('POST', '/v2/repository/models/simple/unload')).status).toBe(200);
    expect((await call('GET', '/v2/models/simple/ready')).status).toBe(400);
    expect(await jsonOf(await call('POST', '/v2/repository/index', { ready: true }))).toEqual([]);
    expect((await call('POST', '/v2/repository/models/simple/load', {})).status).toBe(200);
    expect((await call('GET', '/v2/models/simple/ready')).status).toBe(200);
  });

  it('aborts the engine request when the client disconnects', async () => {
    // The engine's API with infer held open until the request's signal fires.
    let seen: ((r: InferRequest) => void) | undefined;
    const arrived = new Promise<InferRequest>((r) => (seen = r));
    const api: ServerApi = Object.create(engine.server, {
      infer: {
        value: (req: InferRequest) =>
          new Promise((_res, rej) => {
            seen!(req);
            req.signal!.addEventListener('abort', () => rej(cancelled('client went away')));
          }),
      },
    });
    const srv = await startHttpServer(api, { port: 0, host: '127.0.0.1' });
    try {
      const ac = new AbortController();
      const pending = fetch(`http://127.0.0.1:${srv.port}/v2/models/simple/infer`, {
        method: 'POST',
        body: JSON.stringify(inferBody()),
        signal: ac.signal,
      }).catch((e: Error) => e.name);
      const req = await arrived;
      expect(req.inputs.map((i) => i.name)).toEqual(['INPUT0', 'INPUT1']);
      expect(req.signal!.aborted).toBe(false);
      ac.abort();
      expect(await pending).toBe('AbortError');
      await new Promise<void>((r) => (req.signal!.aborted ? r() : req.signal!.addEventListener('abort', () => r())));
      expect(req.signal!.aborted).toBe(true);
    } finally {
      await srv.close();
    }
  });
});
