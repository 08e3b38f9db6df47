// perf_analyzer's modes as a user drives them, each emulated from its source
// (test/fixtures/perf-analyzer.ts, test/fixtures/triton-http-client.ts): the
// calls it makes before measuring (server metadata, model metadata and
// config, parsed as ModelParser parses them), the requests each mode sends
// (-i http and -i grpc, --shared-memory=system on both with its
// register/unregister sequence, --streaming on a decoupled model with the
// empty final response, --sequence-length sequences, --input-data JSON with
// validation data, request-rate mode's overlapping async requests matched
// by id) and the statistics it reads after. perf_analyzer itself cannot be
// installed here (docs/engine/protocol-compatibility.md).
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { listSharedMemoryKeys } from '../../client/shared-memory.ts';
import { shmClose, shmMap, shmOpen, shmTruncate, shmUnlink } from '../../native/index.ts';
import { JS_ECHO_MODEL, writeAccumulator, writeModel } from '../fixtures/test-models.ts';
import { writeStreamModels } from '../fixtures/stream-models.ts';
import { cppInferRequest, cppInferResult, post, type CppInput } from '../fixtures/triton-http-client.ts';
import {
  packValues,
  paInputDataStep,
  paParseModel,
  paParseStatistics,
  paProtoJson,
  paRequestId,
  paSequenceSchedule,
  type PaModel,
} from '../fixtures/perf-analyzer.ts';
import {
  encodeBytesTensor,
  httpJson,
  protoLoaderClient,
  removeDir,
  startTestEngine,
  tempRepo,
  toF32,
  toI32,
  type ProtoClient,
} from './helpers.ts';

// A JS identity model whose tensor names are unique to this process: perf_analyzer names its
// shm keys after the tensors ("/<tensor>_<stream>_<step>"), and /dev/shm is shared by every test run here.
const IN = `PA${process.pid}_IN`;
const OUT = `PA${process.pid}_OUT`;
const ECHO_CONFIG = `name: "pa_echo"
backend: "js"
default_model_filename: "model.ts"
max_batch_size: 8
input [ { name: "${IN}", data_type: TYPE_FP32, dims: [ 4 ] } ]
output [ { name: "${OUT}", data_type: TYPE_FP32, dims: [ 4 ] } ]
dynamic_batching { }
`;
const ECHO_MODEL = JS_ECHO_MODEL.replace(/INPUT0/g, IN).replace(/OUTPUT0/g, OUT);

let repo: string;
let engine: RunningEngine;
let client: ProtoClient;

beforeAll(async () => {
  repo = tempRepo('l0-pa-modes', ['simple']);
  writeModel(repo, 'pa_echo', ECHO_CONFIG, { 'model.ts': ECHO_MODEL });
  writeAccumulator(repo, 'acc', 'onnx', 'direct { }');
  writeStreamModels(repo);
  engine = await startTestEngine({ modelRepository: repo });
  client = protoLoaderClient(engine.grpcPort);
});
afterAll(async () => {
  client?.close();
  await engine?.stop();
  removeDir(repo);
  expect(listSharedMemoryKeys(`/PA${process.pid}_`)).toEqual([]);
});

const getJson = async (p: string) => (await httpJson(engine.httpPort, 'GET', p)).json;

/** -i http: GET /v2 (extensions), the model's metadata and config, parsed as ModelParser does. */
async function startupHttp(model: string): Promise<{ extensions: string[]; model: PaModel }> {
  const server = await getJson('/v2');
  return {
    extensions: server.extensions,
    model: paParseModel(await getJson(`/v2/models/${model}`), await getJson(`/v2/models/${model}/config`)),
  };
}

/** -i grpc: ServerMetadata, ModelMetadata and ModelConfig, each turned into perf_analyzer's JSON first. */
async function startupGrpc(model: string): Promise<{ extensions: string[]; model: PaModel }> {
  const server = await client.call('ServerMetadata', {});
  const metadata = paProtoJson(await client.call('ModelMetadata', { name: model, version: '' }));
  const config = paProtoJson(await client.call('ModelConfig', { name: model, version: '' })).config;
  return { extensions: server.extensions, model: paParseModel(metadata, config) };
}

/** A ModelInferRequest as the C++ gRPC client builds it (empty id/version, the empty-final flag always set). */
function grpcRequest(
  model: string,
  inputs: CppInput[],
  outputs: Array<{ name: string; shm?: { region: string; byteSize: number } }>,
  opts: { id?: string; seq?: { id: number; start: boolean; end: boolean }; emptyFinal?: boolean } = {},
) {
  const parameters: Record<string, object> = { triton_enable_empty_final_response: { bool_param: opts.emptyFinal ?? false } };
  if (opts.seq) {
    parameters.sequence_id = { int64_param: opts.seq.id };
    parameters.sequence_start = { bool_param: opts.seq.start };
    parameters.sequence_end = { bool_param: opts.seq.end };
  }
  const shmParams = (s: { region: string; byteSize: number }) => ({
    shared_memory_region: { string_param: s.region },
    shared_memory_byte_size: { int64_param: s.byteSize },
  });
  return {
    model_name: model,
    model_version: '',
    id: opts.id ?? '',
    parameters,
    inputs: inputs.map((i) => ({ name: i.name, datatype: i.datatype, shape: i.shape, parameters: i.shm ? shmParams(i.shm) : {} })),
    outputs: outputs.map((o) => ({ name: o.name, parameters: o.shm ? shmParams(o.shm) : {} })),
    raw_input_contents: inputs.filter((i) => !i.shm).map((i) => Buffer.from(i.data!)),
  };
}

const SIMPLE_INPUTS = (a: number[], b: number[]): CppInput[] => [
  { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: packValues('INT32', a) },
  { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: packValues('INT32', b) },
];
const A = Array.from({ length: 16 }, (_, i) => i);
const B = Array.from({ length: 16 }, (_, i) => 100 - i);

describe('L0_perf_analyzer_modes', () => {
  it('-i http: startup reads parse; concurrent sync requests (binary in and out) all answer; the stats parse', async () => {
    const { extensions, model } = await startupHttp('simple');
    expect(extensions).toEqual(expect.arrayContaining(['system_shared_memory', 'binary_tensor_data', 'statistics']));
    expect([model.maxBatchSize, model.scheduler, model.decoupled, model.inputs.get('INPUT0')!.shape]).toEqual([8, 'NONE', false, [16]]);
    const one = async () => {
      const r = cppInferRequest({ model: 'simple' }, SIMPLE_INPUTS(A, B), [{ name: 'OUTPUT0' }, { name: 'OUTPUT1' }]);
      const res = cppInferResult(await post(engine.httpPort, r.path, r.headers, r.body));
      expect(res.error).toBeUndefined();
      expect(Array.from(toI32(res.rawData('OUTPUT0')))).toEqual(A.map((x, i) => x + B[i]!));
    };
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        for (let i = 0; i < 5; i++) await one();
      }),
    );
    const stats = paParseStatistics(await getJson('/v2/models/simple/stats'), true).get('simple:1')!;
    expect(stats.success).toBeGreaterThanOrEqual(20);
    expect(stats.computeInfer).toBe(stats.success);
  });

  it('-i grpc: startup reads parse from the proto JSON; requests answer; ModelStatistics parses', async () => {
    const { model } = await startupGrpc('simple');
    expect([model.maxBatchSize, model.inputs.get('INPUT1')!.shape, model.outputs.get('OUTPUT1')!.datatype]).toEqual([8, [16], 'INT32']);
    const acc = await startupGrpc('acc');
    expect(acc.model.scheduler).toBe('SEQUENCE');
    const res = await client.call('ModelInfer', grpcRequest('simple', SIMPLE_INPUTS(A, B), [{ name: 'OUTPUT1' }]));
    expect(Array.from(toI32(res.raw_output_contents[0]))).toEqual(A.map((x, i) => x - B[i]!));
    const stats = paParseStatistics(await client.call('ModelStatistics', { name: 'simple', version: '' }), false);
    expect(stats.get('simple:1')!.success).toBeGreaterThanOrEqual(1);
  });

  for (const protocol of ['http', 'grpc'] as const) {
    it(`--shared-memory=system -i ${protocol}: unregister all, register one region per tensor, shm requests whose answers parse, unregister all`, async () => {
      const model = protocol === 'http' ? (await startupHttp('pa_echo')).model : (await startupGrpc('pa_echo')).model;
      const batch = 2;
      const bytes = 4 * 4 * batch;
      const unregisterAll = async () => {
        if (protocol === 'http') {
          for (const p of ['/v2/systemsharedmemory/unregister', '/v2/cudasharedmemory/unregister'])
            expect((await httpJson(engine.httpPort, 'POST', p)).status).toBe(200);
        } else {
          await client.call('SystemSharedMemoryUnregister', { name: '' });
          await client.call('CudaSharedMemoryUnregister', { name: '' });
        }
      };
      await unregisterAll(); // Init(): the clean start
      // CreateMemoryRegion: output region, then one input region per (stream, step); key "/" + region name.
      const names = [OUT, `${IN}_0_0`];
      const maps = names.map((n) => {
        const fd = shmOpen(`/${n}`, { create: true });
        shmTruncate(fd, bytes);
        const m = shmMap(fd, 0, bytes);
        shmClose(fd);
        return m;
      });
      try {
        for (const n of names) {
          if (protocol === 'http')
            expect(
              (
                await httpJson(engine.httpPort, 'POST', `/v2/systemsharedmemory/region/${n}/register`, {
                  key: `/${n}`,
                  offset: 0,
                  byte_size: bytes,
                })
              ).status,
            ).toBe(200);
          else await client.call('SystemSharedMemoryRegister', { name: n, key: `/${n}`, offset: 0, byte_size: bytes });
        }
        const input = Float32Array.from({ length: 4 * batch }, (_, i) => i * 1.5);
        maps[1]!.bytes.set(new Uint8Array(input.buffer));
        const inputs: CppInput[] = [
          { name: IN, datatype: 'FP32', shape: [batch, ...model.inputs.get(IN)!.shape], shm: { region: `${IN}_0_0`, byteSize: bytes } },
        ];
        const outputs = [{ name: OUT, shm: { region: OUT, byteSize: bytes } }];
        for (let i = 0; i < 3; i++) {
          maps[0]!.bytes.fill(0);
          if (protocol === 'http') {
            const r = cppInferRequest({ model: 'pa_echo' }, inputs, outputs);
            const res = cppInferResult(await post(engine.httpPort, r.path, r.headers, r.body));
            expect(res.error).toBeUndefined();
            expect(res.shape(OUT)).toEqual([batch, 4]);
          } else {
            const res = await client.call('ModelInfer', grpcRequest('pa_echo', inputs, outputs));
            expect(res.outputs[0].shape.map(Number)).toEqual([batch, 4]);
          }
          expect(Array.from(toF32(maps[0]!.bytes))).toEqual(Array.from(input));
        }
      } finally {
        await unregisterAll(); // ~InferDataManagerShm
        for (const m of maps) m.close();
        for (const n of names) shmUnlink(`/${n}`);
      }
    });
  }

  it('--streaming on a decoupled model: each response carries the request id and triton_final_response, then an empty final one', async () => {
    const { model } = await startupGrpc('js_stream');
    expect(model.decoupled).toBe(true);
    const call = client.raw.ModelStreamInfer() as grpc.ClientDuplexStream<object, any>;
    const got: any[] = [];
    const done = new Promise<void>((resolve, reject) => {
      call.on('data', (m: any) => {
        got.push(m);
        if (got.filter((x) => x.infer_response?.parameters?.triton_final_response?.bool_param).length === 2) call.end();
      });
      call.on('error', reject);
      call.on('end', () => resolve());
    });
    for (const [i, reps] of [
      [0, 3],
      [1, 2],
    ] as const) {
      const req = grpcRequest('js_stream', [{ name: 'PROMPT', datatype: 'BYTES', shape: [1, 1], data: encodeBytesTensor(['hi']) }], [], {
        id: paRequestId(0, i),
        emptyFinal: true,
      });
      (req.parameters as Record<string, object>).REPETITION = { int64_param: reps };
      call.write(req);
    }
    await done;
    const byId = (id: string) =>
      got
        .filter((m) => m.infer_response.id === id)
        .map((m) => ({ outputs: m.infer_response.outputs.length, final: m.infer_response.parameters.triton_final_response.bool_param }));
    // IsNullResponse: no outputs and final; IsFinalResponse from the parameter.
    expect(byId(paRequestId(0, 0))).toEqual([
      { outputs: 2, final: false },
      { outputs: 2, final: false },
      { outputs: 2, final: false },
      { outputs: 0, final: true },
    ]);
    expect(byId(paRequestId(0, 1))).toEqual([
      { outputs: 2, final: false },
      { outputs: 2, final: false },
      { outputs: 0, final: true },
    ]);
    expect(got.every((m) => m.error_message === '')).toBe(true);
  });

  it('--sequence-length over HTTP and gRPC: interleaved sequences with ids, start and end flags; each accumulates its own values', async () => {
    const { model } = await startupHttp('acc');
    expect(model.scheduler).toBe('SEQUENCE');
    for (const protocol of ['http', 'grpc'] as const) {
      const base = protocol === 'http' ? 1 : 11;
      const sums = new Map<number, number>();
      for (const r of paSequenceSchedule(base, 3, 4)) {
        const value = r.id * 10 + r.step;
        const inputs: CppInput[] = [{ name: 'INPUT', datatype: 'FP32', shape: [1, 1], data: packValues('FP32', [value]) }];
        let out: number;
        if (protocol === 'http') {
          const q = cppInferRequest({ model: 'acc', sequenceId: r.id, sequenceStart: r.start, sequenceEnd: r.end }, inputs, [
            { name: 'OUTPUT' },
          ]);
          const res = cppInferResult(await post(engine.httpPort, q.path, q.headers, q.body));
          expect(res.error).toBeUndefined();
          out = toF32(res.rawData('OUTPUT'))[0]!;
        } else {
          const res = await client.call('ModelInfer', grpcRequest('acc', inputs, [{ name: 'OUTPUT' }], { seq: r }));
          out = toF32(res.raw_output_contents[0])[0]!;
        }
        sums.set(r.id, (r.start ? 0 : sums.get(r.id)!) + value);
        expect([r.id, r.step, out]).toEqual([r.id, r.step, sums.get(r.id)]);
      }
    }
  });

  it('--input-data from a JSON file (plain arrays and {content, shape}), outputs checked against its validation_data', async () => {
    const { model } = await startupHttp('simple');
    const file = {
      data: [
        { INPUT0: A, INPUT1: { content: B, shape: [16] } },
        { INPUT0: { content: [A.slice(0, 8), A.slice(8)], shape: [16] }, INPUT1: new Array(16).fill(2) },
      ],
      validation_data: [
        { OUTPUT0: A.map((x, i) => x + B[i]!), OUTPUT1: A.map((x, i) => x - B[i]!) },
        { OUTPUT0: A.map((x) => x + 2), OUTPUT1: A.map((x) => x - 2) },
      ],
    };
    for (let step = 0; step < file.data.length; step++) {
      const inputs = paInputDataStep(file.data[step]!, model).map((t) => ({ ...t, shape: [1, ...t.shape] }));
      const q = cppInferRequest({ model: 'simple' }, inputs, [{ name: 'OUTPUT0' }, { name: 'OUTPUT1' }]);
      const res = cppInferResult(await post(engine.httpPort, q.path, q.headers, q.body));
      // ValidateOutputs: the raw bytes equal the expected ones, no more, no less.
      for (const [name, values] of Object.entries(file.validation_data[step]!)) {
        expect(Buffer.compare(res.rawData(name), Buffer.from(packValues('INT32', values)))).toBe(0);
      }
    }
  });

  it('request-rate mode: overlapping async requests on a schedule, each answer found by its request id (HTTP and gRPC)', async () => {
    const rate = 200; // requests per second, sent without waiting for answers
    const ids: string[] = [];
    const pending: Array<Promise<{ id: string; ok: boolean }>> = [];
    for (let i = 0; i < 40; i++) {
      const id = paRequestId(i % 2, i);
      ids.push(id);
      if (i % 2 === 0) {
        const q = cppInferRequest(
          { model: 'pa_echo', requestId: id },
          [{ name: IN, datatype: 'FP32', shape: [1, 4], data: packValues('FP32', [i, i, i, i]) }],
          [{ name: OUT }],
        );
        pending.push(
          post(engine.httpPort, q.path, q.headers, q.body).then((reply) => {
            const r = cppInferResult(reply);
            return { id: r.json!.id as string, ok: r.error === undefined && toF32(r.rawData(OUT))[0] === i };
          }),
        );
      } else {
        const q = grpcRequest(
          'pa_echo',
          [{ name: IN, datatype: 'FP32', shape: [1, 4], data: packValues('FP32', [i, i, i, i]) }],
          [{ name: OUT }],
          { id },
        );
        pending.push(client.call('ModelInfer', q).then((r: any) => ({ id: r.id, ok: toF32(r.raw_output_contents[0])[0] === i })));
      }
      await new Promise((r) => setTimeout(r, 1000 / rate));
    }
    const answers = await Promise.all(pending);
    expect(answers.map((a) => a.id)).toEqual(ids);
    expect(answers.every((a) => a.ok)).toBe(true);
  });
});
