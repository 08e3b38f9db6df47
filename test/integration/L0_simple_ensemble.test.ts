// Ensembles on the real engine: the seed's search_pipeline_ensemble end to
// end over gRPC and HTTP against its steps called one by one, the moderated
// ensemble's two branches, concurrent branches, the encoder step batching
// with direct encoder calls, and load-time validation of bad ensembles.
import { writeFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TritonGrpcClient } from '../../client/grpc-client.ts';
import type { RunningEngine } from '../../engine/server/server.ts';
import type { InferResponse } from '../../engine/api/infer-request.ts';
import type { ModelStatistics } from '../../engine/api/server-api.ts';
import { makeJpeg } from '../fixtures/images.ts';
import { JS_ECHO_MODEL } from '../fixtures/test-models.ts';
import { f32Bytes, maxAbsDiff, removeDir, seededFloats, startTestEngine, tempRepo, toF32 } from './helpers.ts';

const BUNDLED = [
  'image_preprocess_model',
  'clip_encoder_model',
  'harmful_filter_model',
  'search_pipeline_ensemble',
  'moderated_search_ensemble',
];
const BRANCH_MS = 400;

/** A js model that sleeps BRANCH_MS and outputs when it ran: SPAN FP64 [2] = [start, end] (epoch ms). */
const SPAN_MODEL = `export async function execute(requests: any[]) {
  return Promise.all(requests.map(async () => {
    const start = performance.timeOrigin + performance.now();
    await new Promise((r) => setTimeout(r, ${BRANCH_MS}));
    const end = performance.timeOrigin + performance.now();
    return { outputs: { SPAN: { datatype: 'FP64', shape: [2], data: new Float64Array([start, end]) } } };
  }));
}
`;
const spanConfig = (name: string) => `name: "${name}"
backend: "js"
max_batch_size: 0
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "SPAN", data_type: TYPE_FP64, dims: [ 2 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
`;
const ECHO_CONFIG = `name: "js_echo"
backend: "js"
max_batch_size: 0
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
`;
/** Same wiring as moderated_search_ensemble: one step, then two branches reading its output. */
const PAR_ENSEMBLE = `name: "par_ensemble"
platform: "ensemble"
max_batch_size: 0
input [ { name: "X", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "SPAN_A", data_type: TYPE_FP64, dims: [ 2 ] }, { name: "SPAN_B", data_type: TYPE_FP64, dims: [ 2 ] } ]
ensemble_scheduling { step [
  { model_name: "js_echo" model_version: -1 input_map { key: "INPUT0" value: "X" } output_map { key: "OUTPUT0" value: "Y" } },
  { model_name: "span_a" model_version: -1 input_map { key: "INPUT0" value: "Y" } output_map { key: "SPAN" value: "SPAN_A" } },
  { model_name: "span_b" model_version: -1 input_map { key: "INPUT0" value: "Y" } output_map { key: "SPAN" value: "SPAN_B" } }
] }
`;

const step = (model: string, inMap: Record<string, string>, outMap: Record<string, string>) =>
  `{ model_name: "${model}" model_version: -1 ${Object.entries(inMap)
    .map(([k, v]) => `input_map { key: "${k}" value: "${v}" }`)
    .join(' ')} ${Object.entries(outMap)
    .map(([k, v]) => `output_map { key: "${k}" value: "${v}" }`)
    .join(' ')} }`;
const ensemble = (name: string, inputs: string, outputs: string, steps: string[]) =>
  `name: "${name}"\nplatform: "ensemble"\nmax_batch_size: 0\ninput [ ${inputs} ]\noutput [ ${outputs} ]\nensemble_scheduling { step [ ${steps.join(', ')} ] }\n`;
const RAW = '{ name: "RAW_IMAGE", data_type: TYPE_UINT8, dims: [ -1 ] }';
const VEC = '{ name: "FINAL_VECTOR", data_type: TYPE_FP32, dims: [ 512 ] }';
const PRE = step('image_preprocess_model', { image_bytes: 'RAW_IMAGE' }, { preprocessed_tensor: 'PRE' });
const ENC = step('clip_encoder_model', { pixel_values: 'PRE' }, { image_embeds: 'FINAL_VECTOR' });

/** Broken ensembles, each with the words its UNAVAILABLE reason must contain. */
const BAD: Record<string, { config: string; mentions: string[] }> = {
  bad_unused_input: {
    config: ensemble('bad_unused_input', `${RAW}, { name: "EXTRA", data_type: TYPE_FP32, dims: [ 4 ] }`, VEC, [PRE, ENC]),
    mentions: ['bad_unused_input', "'EXTRA'", 'not used'],
  },
  bad_unwritten_output: {
    config: ensemble('bad_unwritten_output', RAW, `${VEC}, { name: "NEVER", data_type: TYPE_FP32, dims: [ 2 ] }`, [PRE, ENC]),
    mentions: ['bad_unwritten_output', "'NEVER'", 'not written'],
  },
  bad_dtype: {
    config: ensemble('bad_dtype', '{ name: "RAW_IMAGE", data_type: TYPE_FP32, dims: [ -1 ] }', VEC, [PRE, ENC]),
    mentions: ['bad_dtype', 'step[0]', 'image_preprocess_model', "'RAW_IMAGE'", 'TYPE_FP32', 'TYPE_UINT8'],
  },
  bad_missing_model: {
    config: ensemble('bad_missing_model', RAW, VEC, [
      PRE,
      step('no_such_model', { pixel_values: 'PRE' }, { image_embeds: 'FINAL_VECTOR' }),
    ]),
    mentions: ['bad_missing_model', 'step[1]', "'no_such_model'"],
  },
  bad_unknown_output_key: {
    config: ensemble('bad_unknown_output_key', RAW, VEC, [
      PRE,
      step('clip_encoder_model', { pixel_values: 'PRE' }, { embeds: 'FINAL_VECTOR' }),
    ]),
    mentions: ['bad_unknown_output_key', 'step[1]', "'embeds'", 'clip_encoder_model'],
  },
  bad_cycle: {
    // step 0 needs T2 (from step 1), step 1 needs T1 (from step 0).
    config: ensemble(
      'bad_cycle',
      '{ name: "X", data_type: TYPE_FP32, dims: [ -1 ] }',
      '{ name: "OUT", data_type: TYPE_FP32, dims: [ -1 ] }',
      [
        step('js_echo', { INPUT0: 'T2' }, { OUTPUT0: 'T1' }),
        step('js_echo2', { INPUT0: 'T1' }, { OUTPUT0: 'T2' }),
        step('js_echo', { INPUT0: 'X' }, { OUTPUT0: 'OUT' }),
      ],
    ),
    mentions: ['bad_cycle', 'circular', 'step[0]', 'step[1]'],
  },
};

function writeModel(repo: string, name: string, config: string, model?: string): void {
  mkdirSync(path.join(repo, name, '1'), { recursive: true });
  writeFileSync(path.join(repo, name, 'config.pbtxt'), config);
  if (model !== undefined) writeFileSync(path.join(repo, name, '1', 'model.ts'), model);
}

let engine: RunningEngine;
let repo: string;
let grpc: TritonGrpcClient;
let jpeg: Buffer;

const stats = (name: string): ModelStatistics => engine.server.modelStatistics(name)[0]!;
const outF32 = (r: InferResponse, name: string) => toF32(r.outputs.find((o) => o.name === name)!.data);

/** The reference: preprocess, then encoder, each called by the client over gRPC. */
async function stepByStep(image: Buffer): Promise<{ pre: Float32Array; vec: Float32Array }> {
  const p = await grpc.modelInfer({
    model_name: 'image_preprocess_model',
    inputs: [{ name: 'image_bytes', datatype: 'UINT8', shape: [image.length] }],
    raw_input_contents: [image],
  });
  expect(p.outputs[0]!.shape.map(Number)).toEqual([3, 224, 224]);
  const e = await grpc.modelInfer({
    model_name: 'clip_encoder_model',
    inputs: [{ name: 'pixel_values', datatype: 'FP32', shape: [1, 3, 224, 224] }],
    raw_input_contents: [p.raw_output_contents[0]!],
  });
  expect(e.outputs[0]!.shape.map(Number)).toEqual([1, 512]);
  return { pre: toF32(p.raw_output_contents[0]!), vec: toF32(e.raw_output_contents[0]!) };
}

beforeAll(async () => {
  repo = tempRepo('l0-ensemble', [], BUNDLED);
  writeModel(repo, 'js_echo', ECHO_CONFIG, JS_ECHO_MODEL);
  writeModel(repo, 'js_echo2', ECHO_CONFIG.replace('"js_echo"', '"js_echo2"'), JS_ECHO_MODEL);
  writeModel(repo, 'span_a', spanConfig('span_a'), SPAN_MODEL);
  writeModel(repo, 'span_b', spanConfig('span_b'), SPAN_MODEL);
  writeModel(repo, 'par_ensemble', PAR_ENSEMBLE);
  for (const [name, b] of Object.entries(BAD)) writeModel(repo, name, b.config);
  engine = await startTestEngine({ modelRepository: repo, controlMode: 'explicit', loadModels: ['*'] });
  grpc = new TritonGrpcClient(`127.0.0.1:${engine.grpcPort}`);
  jpeg = await makeJpeg(320, 240, 11);
});

afterAll(async () => {
  grpc?.close();
  await engine?.stop();
  removeDir(repo);
});

describe('L0_simple_ensemble', () => {
  it('search_pipeline_ensemble over gRPC equals preprocess then encoder called one by one', async () => {
    const ref = await stepByStep(jpeg);
    const r = await grpc.modelInfer({
      model_name: 'search_pipeline_ensemble',
      inputs: [{ name: 'RAW_IMAGE', datatype: 'UINT8', shape: [jpeg.length] }],
      raw_input_contents: [jpeg],
    });
    expect(r.outputs.map((o) => [o.name, o.datatype, o.shape.map(Number)])).toEqual([['FINAL_VECTOR', 'FP32', [512]]]);
    const vec = toF32(r.raw_output_contents[0]!);
    expect(vec.length).toBe(512);
    expect(maxAbsDiff(vec, ref.vec)).toBeLessThan(1e-5);
    // A unit vector that depends on the image: another image gives another vector.
    expect(Math.hypot(...vec)).toBeCloseTo(1, 3);
    const other = await stepByStep(await makeJpeg(320, 240, 12));
    expect(maxAbsDiff(other.vec, ref.vec)).toBeGreaterThan(1e-3);
  });

  it('search_pipeline_ensemble over HTTP (binary data) equals the same steps', async () => {
    const ref = await stepByStep(jpeg);
    const header = Buffer.from(
      JSON.stringify({
        inputs: [{ name: 'RAW_IMAGE', datatype: 'UINT8', shape: [jpeg.length], parameters: { binary_data_size: jpeg.length } }],
        outputs: [{ name: 'FINAL_VECTOR', parameters: { binary_data: true } }],
      }),
    );
    const res = await fetch(`http://127.0.0.1:${engine.httpPort}/v2/models/search_pipeline_ensemble/infer`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': String(header.length) },
      body: Buffer.concat([header, jpeg]),
    });
    expect(res.status).toBe(200);
    const body = Buffer.from(await res.arrayBuffer());
    const hlen = Number(res.headers.get('Inference-Header-Content-Length'));
    const json = JSON.parse(body.subarray(0, hlen).toString()) as {
      outputs: Array<{ name: string; shape: number[]; parameters: { binary_data_size: number } }>;
    };
    expect(json.outputs[0]!.name).toBe('FINAL_VECTOR');
    expect(json.outputs[0]!.shape).toEqual([512]);
    expect(json.outputs[0]!.parameters.binary_data_size).toBe(2048);
    const vec = toF32(body.subarray(hlen, hlen + 2048));
    expect(maxAbsDiff(vec, ref.vec)).toBeLessThan(1e-5);
  });

  it('moderated_search_ensemble returns the encoder and the filter results of one preprocessing', async () => {
    const ref = await stepByStep(jpeg);
    const filter = await engine.server.infer({
      modelName: 'harmful_filter_model',
      inputs: [{ name: 'pixel_values', datatype: 'FP32', shape: [1, 3, 224, 224], data: new Uint8Array(ref.pre.buffer) }],
      outputs: [],
      parameters: {},
    });
    const r = await engine.server.infer({
      modelName: 'moderated_search_ensemble',
      inputs: [{ name: 'RAW_IMAGE', datatype: 'UINT8', shape: [jpeg.length], data: new Uint8Array(jpeg) }],
      outputs: [],
      parameters: {},
    });
    expect(r.outputs.map((o) => [o.name, o.shape])).toEqual([
      ['FINAL_VECTOR', [512]],
      ['HARMFUL_PROBABILITIES', [2]],
    ]);
    expect(maxAbsDiff(outF32(r, 'FINAL_VECTOR'), ref.vec)).toBeLessThan(1e-5);
    const probs = outF32(r, 'HARMFUL_PROBABILITIES');
    expect(maxAbsDiff(probs, outF32(filter, 'probabilities'))).toBeLessThan(1e-5);
    expect(probs[0]! + probs[1]!).toBeCloseTo(1, 4);
  });

  it("moderated_search_ensemble's encoder and filter steps run at the same time", async () => {
    // Watch the step requests the ensemble sends to the composing models' schedulers.
    const srv = engine.engine;
    const spans: Record<string, [number, number]> = {};
    const original = srv.inferValidated;
    srv.inferValidated = async (r) => {
      const t0 = performance.now();
      try {
        return await original.call(srv, r);
      } finally {
        spans[r.modelName] = [t0, performance.now()];
      }
    };
    try {
      await engine.server.infer({
        modelName: 'moderated_search_ensemble',
        inputs: [{ name: 'RAW_IMAGE', datatype: 'UINT8', shape: [jpeg.length], data: new Uint8Array(jpeg) }],
        outputs: [],
        parameters: {},
      });
    } finally {
      srv.inferValidated = original;
    }
    const pre = spans.image_preprocess_model!;
    const enc = spans.clip_encoder_model!;
    const filt = spans.harmful_filter_model!;
    expect(pre && enc && filt).toBeTruthy();
    // Both branches start only after preprocessing, and each starts before the other ends.
    expect(enc[0]).toBeGreaterThanOrEqual(pre[1]);
    expect(filt[0]).toBeGreaterThanOrEqual(pre[1]);
    expect(enc[0]).toBeLessThan(filt[1]);
    expect(filt[0]).toBeLessThan(enc[1]);
  });

  it('runs independent branches concurrently: two 400 ms branches take ~400 ms, not 800', async () => {
    const t0 = performance.now();
    const r = await engine.server.infer({
      modelName: 'par_ensemble',
      inputs: [{ name: 'X', datatype: 'FP32', shape: [4], data: f32Bytes([1, 2, 3, 4]) }],
      outputs: [],
      parameters: {},
    });
    const total = performance.now() - t0;
    const span = (n: string) => new Float64Array(Uint8Array.from(r.outputs.find((o) => o.name === n)!.data).buffer);
    const [a0, a1] = span('SPAN_A');
    const [b0, b1] = span('SPAN_B');
    expect(a1! - a0!).toBeGreaterThanOrEqual(BRANCH_MS - 5);
    expect(b1! - b0!).toBeGreaterThanOrEqual(BRANCH_MS - 5);
    // The two spans overlap (each started before the other ended), and the whole call took about one branch.
    expect(a0!).toBeLessThan(b1!);
    expect(b0!).toBeLessThan(a1!);
    expect(Math.abs(a0! - b0!)).toBeLessThan(BRANCH_MS / 2);
    expect(total).toBeLessThan(BRANCH_MS * 1.8); // in sequence: >= 2 x BRANCH_MS
    // The ensemble's own statistics count the call.
    expect(stats('par_ensemble').inference_count).toBe(1);
    expect(stats('par_ensemble').inference_stats.success.count).toBe(1);
  });

  it('marks each broken ensemble UNAVAILABLE with a reason naming ensemble, step and tensor; the rest stay READY', async () => {
    const index = engine.server.repositoryIndex(false);
    const byName = new Map(index.map((m) => [m.name, m]));
    for (const [name, b] of Object.entries(BAD)) {
      const m = byName.get(name);
      expect(m?.state, name).toBe('UNAVAILABLE');
      for (const w of b.mentions) expect(m!.reason, `${name}: ${m!.reason}`).toContain(w);
      expect(engine.server.isModelReady(name)).toBe(false);
    }
    for (const ok of [...BUNDLED, 'js_echo', 'js_echo2', 'span_a', 'span_b', 'par_ensemble']) {
      expect(byName.get(ok)?.state, ok).toBe('READY');
    }
    // Over the wire too: the broken one is not ready and a request names why.
    expect((await grpc.modelReady('bad_dtype')).ready).toBe(false);
    expect((await grpc.modelReady('search_pipeline_ensemble')).ready).toBe(true);
    const err = await grpc
      .modelInfer({
        model_name: 'bad_dtype',
        inputs: [{ name: 'RAW_IMAGE', datatype: 'UINT8', shape: [jpeg.length] }],
        raw_input_contents: [jpeg],
      })
      .then(
        () => undefined,
        (e: { code: number; details: string }) => e,
      );
    expect(err?.code).toBe(14); // UNAVAILABLE
    expect(err?.details).toContain("'RAW_IMAGE'");
  });

  it("batches the ensemble's encoder step together with direct calls to the encoder", async () => {
    const images = await Promise.all([21, 22, 23, 24].map((s) => makeJpeg(200, 150, s)));
    const refs = await Promise.all(images.map((img) => stepByStep(img)));
    // A window only a batch of 8 closes early: 4 ensemble calls + 4 direct calls make one batch
    // (the 5 s window would split a late straggler into a second execution).
    const cfg = structuredClone(engine.server.modelConfig('clip_encoder_model')) as unknown as Record<string, any>;
    cfg.dynamic_batching = { preferred_batch_size: [8], max_queue_delay_microseconds: 5_000_000 };
    await grpc.repositoryModelLoad('clip_encoder_model', { config: { string_param: JSON.stringify(cfg) } });
    expect(engine.server.modelConfig('clip_encoder_model').dynamic_batching?.preferred_batch_size).toEqual([8]);
    const before = stats('clip_encoder_model');
    expect(before.inference_count).toBe(0); // a fresh version

    const pixels = [0, 1, 2, 3].map((i) => f32Bytes(seededFloats(3 * 224 * 224, 100 + i)));
    const viaEnsemble = images.map((img) =>
      engine.server.infer({
        modelName: 'search_pipeline_ensemble',
        inputs: [{ name: 'RAW_IMAGE', datatype: 'UINT8', shape: [img.length], data: new Uint8Array(img) }],
        outputs: [],
        parameters: {},
      }),
    );
    const direct = pixels.map((px) =>
      grpc.modelInfer({
        model_name: 'clip_encoder_model',
        inputs: [{ name: 'pixel_values', datatype: 'FP32', shape: [1, 3, 224, 224] }],
        raw_input_contents: [px],
      }),
    );
    const [ens, dir] = await Promise.all([Promise.all(viaEnsemble), Promise.all(direct)]);
    const after = stats('clip_encoder_model');
    expect(after.inference_count).toBe(8);
    expect(after.execution_count).toBe(1);
    expect(after.batch_stats.map((b) => [b.batch_size, b.compute_infer.count])).toEqual([[8, 1]]);
    // Each caller got its own row back.
    for (const [i, r] of ens.entries()) expect(maxAbsDiff(outF32(r, 'FINAL_VECTOR'), refs[i]!.vec)).toBeLessThan(1e-5);
    expect(dir.every((r) => r.outputs[0]!.shape.map(Number).join() === '1,512')).toBe(true);
  });
});
