// Ensembles as Triton's own QA uses them (its L0_ensemble / ensemble tests):
// a classification output carries the composing model's labels; nested
// ensembles in one repository load in dependency order; a batching ensemble
// runs a max_batch_size 0 step whose dims hold the batch dim; a failed step
// answers "in ensemble 'E', " followed by the step's own message.
// Every parameter of the ensemble's request reaches each step.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { writeModel } from '../fixtures/test-models.ts';
import {
  decodeBytesTensor,
  f32Bytes,
  grpcError,
  httpJson,
  protoLoaderClient,
  removeDir,
  startTestEngine,
  tempRepo,
  toF32,
  type ProtoClient,
} from './helpers.ts';

const JS_PASS = `type T = { datatype: string; shape: number[]; data: Uint8Array };
export async function execute(requests: Array<{ inputs: Record<string, T> }>) {
  return requests.map((r) => {
    const t = r.inputs.IN!;
    const values = new Float32Array(Uint8Array.from(t.data).buffer);
    if (values.some((v) => v < 0)) return { error: { code: 'INVALID_ARG' as const, message: 'negative values are refused by this model' } };
    return { outputs: { OUT: { datatype: t.datatype, shape: [...t.shape], data: Uint8Array.from(t.data) } } };
  });
}
`;
/** js_params: P (BYTES) holds the JSON of the parameters its request carried. */
const JS_PARAMS = `type T = { datatype: string; shape: number[]; data: Uint8Array };
export async function execute(requests: Array<{ inputs: Record<string, T>; parameters: Record<string, unknown> }>) {
  return requests.map((r) => {
    const b = new TextEncoder().encode(JSON.stringify(r.parameters));
    const out = new Uint8Array(4 + b.length);
    new DataView(out.buffer).setUint32(0, b.length, true);
    out.set(b, 4);
    return { outputs: { P: { datatype: 'BYTES', shape: [1], data: out } } };
  });
}
`;
const JS_PARAMS_CONFIG = `name: "js_params"
backend: "js"
default_model_filename: "model.ts"
max_batch_size: 0
input [ { name: "X", data_type: TYPE_FP32, dims: [ 1 ] } ]
output [ { name: "P", data_type: TYPE_STRING, dims: [ 1 ] } ]
`;
const paramsEnsemble = (name: string, step: string) => `name: "${name}"
platform: "ensemble"
max_batch_size: 0
input [ { name: "X", data_type: TYPE_FP32, dims: [ 1 ] } ]
output [ { name: "P", data_type: TYPE_STRING, dims: [ 1 ] } ]
ensemble_scheduling { step [ { model_name: "${step}" model_version: -1 input_map { key: "X" value: "X" } output_map { key: "P" value: "P" } } ] }
`;
const jsPass = (name: string, mbs: number, dims: string, labels = '') => `name: "${name}"
backend: "js"
default_model_filename: "model.ts"
max_batch_size: ${mbs}
input [ { name: "IN", data_type: TYPE_FP32, dims: ${dims} } ]
output [ { name: "OUT", data_type: TYPE_FP32, dims: ${dims} ${labels} } ]
`;
const ensemble = (name: string, mbs: number, dims: string, steps: Array<[string, string, string]>, outExtra = '') => `name: "${name}"
platform: "ensemble"
max_batch_size: ${mbs}
input [ { name: "X", data_type: TYPE_FP32, dims: ${dims} } ]
output [ { name: "Y", data_type: TYPE_FP32, dims: ${dims} ${outExtra} } ]
ensemble_scheduling { step [ ${steps
  .map(
    ([model, from, to]) =>
      `{ model_name: "${model}" model_version: -1 input_map { key: "${model.startsWith('js_') ? 'IN' : model === 'simple_fp32_batch' ? 'x' : 'X'}" value: "${from}" } output_map { key: "${model.startsWith('js_') ? 'OUT' : model === 'simple_fp32_batch' ? 'y' : 'Y'}" value: "${to}" } }`,
  )
  .join(', ')} ] }
`;

let repo: string;
let eng: RunningEngine;
let client: ProtoClient;

beforeAll(async () => {
  repo = tempRepo('l0-ensemble', ['simple_fp32_batch']);
  // Classification: the composing model names the labels; ensembles over it (one nested, loading first by name).
  writeModel(repo, 'js_scores', jsPass('js_scores', 0, '[ 16 ]', 'label_filename: "labels.txt"'), { 'model.ts': JS_PASS });
  writeFileSync(path.join(repo, 'js_scores', 'labels.txt'), Array.from({ length: 16 }, (_, i) => `label${i}`).join('\n'));
  writeModel(repo, 'ens_labels', ensemble('ens_labels', 0, '[ 16 ]', [['js_scores', 'X', 'Y']]), {});
  writeModel(repo, 'a_nested_labels', ensemble('a_nested_labels', 0, '[ 16 ]', [['ens_labels', 'X', 'Y']]), {});
  writeModel(repo, 'ens_own_labels', ensemble('ens_own_labels', 0, '[ 16 ]', [['js_scores', 'X', 'Y']], 'label_filename: "mine.txt"'), {});
  writeFileSync(path.join(repo, 'ens_own_labels', 'mine.txt'), Array.from({ length: 16 }, (_, i) => `mine${i}`).join('\n'));
  // Batching ensemble over a non-batching step whose dims start with the batch dim, then a batching step.
  writeModel(repo, 'js_rows', jsPass('js_rows', 0, '[ -1, 4 ]'), { 'model.ts': JS_PASS });
  writeModel(
    repo,
    'ens_mixed_batch',
    ensemble('ens_mixed_batch', 8, '[ 4 ]', [
      ['js_rows', 'X', 'R'],
      ['simple_fp32_batch', 'R', 'Y'],
    ]),
    {},
  );
  // Step errors.
  writeModel(repo, 'js_refuse', jsPass('js_refuse', 0, '[ -1 ]'), { 'model.ts': JS_PASS });
  writeModel(repo, 'ens_fail', ensemble('ens_fail', 0, '[ -1 ]', [['js_refuse', 'X', 'Y']]), {});
  // Request parameters reach the steps (the echo, an ensemble over it, and one nested).
  writeModel(repo, 'js_params', JS_PARAMS_CONFIG, { 'model.ts': JS_PARAMS });
  writeModel(repo, 'ens_params', paramsEnsemble('ens_params', 'js_params'), {});
  writeModel(repo, 'ens_params_nested', paramsEnsemble('ens_params_nested', 'ens_params'), {});
  eng = await startTestEngine({ modelRepository: repo });
  client = protoLoaderClient(eng.grpcPort);
});
afterAll(async () => {
  client?.close();
  await eng?.stop();
  removeDir(repo);
});

const SCORES = Array.from({ length: 16 }, (_, i) => (i === 15 ? 14 : i / 2));

async function top(model: string, k: number): Promise<string[]> {
  const r = await client.call('ModelInfer', {
    model_name: model,
    inputs: [{ name: model === 'js_scores' ? 'IN' : 'X', datatype: 'FP32', shape: [16] }],
    outputs: [{ name: model === 'js_scores' ? 'OUT' : 'Y', parameters: { classification: { int64_param: k } } }],
    raw_input_contents: [f32Bytes(SCORES)],
  });
  return decodeBytesTensor(r.raw_output_contents[0]).map((b) => b.toString());
}

describe('L0_ensemble', () => {
  it('nested ensembles in one repository all load (dependency order, no transient UNAVAILABLE)', async () => {
    const { json } = await httpJson(eng.httpPort, 'POST', '/v2/repository/index', {});
    const states = Object.fromEntries(
      json.map((m: { name: string; state: string; reason?: string }) => [m.name, `${m.state} ${m.reason ?? ''}`.trim()]),
    );
    expect(states).toMatchObject({
      a_nested_labels: 'READY',
      ens_labels: 'READY',
      ens_own_labels: 'READY',
      ens_mixed_batch: 'READY',
      ens_fail: 'READY',
    });
  });

  it("classification through an ensemble carries the composing model's labels", async () => {
    expect(await top('js_scores', 2)).toEqual(['14.000000:15:label15', '7.000000:14:label14']);
    expect(await top('ens_labels', 2)).toEqual(['14.000000:15:label15', '7.000000:14:label14']);
  });

  it('... through a nested ensemble too, and over HTTP', async () => {
    expect(await top('a_nested_labels', 1)).toEqual(['14.000000:15:label15']);
    const { status, json } = await httpJson(eng.httpPort, 'POST', '/v2/models/a_nested_labels/infer', {
      inputs: [{ name: 'X', datatype: 'FP32', shape: [16], data: SCORES }],
      outputs: [{ name: 'Y', parameters: { classification: 1 } }],
    });
    expect(status).toBe(200);
    expect(json.outputs[0].data).toEqual(['14.000000:15:label15']);
  });

  it('an ensemble that declares its own label_filename uses its own labels', async () => {
    expect(await top('ens_own_labels', 1)).toEqual(['14.000000:15:mine15']);
  });

  it('a batching ensemble runs a max_batch_size 0 step whose dims hold the batch dim', async () => {
    const x = Array.from({ length: 12 }, (_, i) => i * 0.75);
    const r = await client.call('ModelInfer', {
      model_name: 'ens_mixed_batch',
      inputs: [{ name: 'X', datatype: 'FP32', shape: [3, 4] }],
      raw_input_contents: [f32Bytes(x)],
    });
    expect(r.outputs[0].shape.map(Number)).toEqual([3, 4]);
    expect(Array.from(toF32(r.raw_output_contents[0]))).toEqual(x.map((v) => v * 2 + 1));
    const { json } = await httpJson(eng.httpPort, 'GET', '/v2/models/ens_mixed_batch');
    expect(json.inputs[0].shape).toEqual([-1, 4]);
  });

  it("a failed step answers \"in ensemble 'E', \" followed by the step's own message", async () => {
    const call = (model: string, input: string) =>
      client.call('ModelInfer', {
        model_name: model,
        inputs: [{ name: input, datatype: 'FP32', shape: [2] }],
        raw_input_contents: [f32Bytes([1, -1])],
      });
    const direct = await grpcError(call('js_refuse', 'IN'));
    expect(direct.details).toContain('negative values are refused by this model');
    const viaEnsemble = await grpcError(call('ens_fail', 'X'));
    expect(viaEnsemble.code).toBe(direct.code);
    expect(viaEnsemble.details).toBe(`in ensemble 'ens_fail', ${direct.details}`);
    const { status, json } = await httpJson(eng.httpPort, 'POST', '/v2/models/ens_fail/infer', {
      inputs: [{ name: 'X', datatype: 'FP32', shape: [2], data: [1, -1] }],
    });
    expect(status).toBe(400);
    expect(json.error).toBe(`in ensemble 'ens_fail', ${direct.details}`);
  });

  it("every parameter of the ensemble's request reaches its steps (Triton's SetParameters), nested too, over gRPC and HTTP", async () => {
    const echo = async (model: string) => {
      const r = await client.call('ModelInfer', {
        model_name: model,
        inputs: [{ name: 'X', datatype: 'FP32', shape: [1] }],
        raw_input_contents: [f32Bytes([1])],
        parameters: { temperature: { string_param: 'warm' }, max_tokens: { int64_param: 7 }, stream_it: { bool_param: true } },
      });
      return JSON.parse(decodeBytesTensor(r.raw_output_contents[0])[0]!.toString());
    };
    const direct = await echo('js_params');
    expect(direct).toMatchObject({ temperature: 'warm', max_tokens: 7, stream_it: true });
    expect(await echo('ens_params')).toEqual(direct);
    expect(await echo('ens_params_nested')).toEqual(direct);
    const { status, json } = await httpJson(eng.httpPort, 'POST', '/v2/models/ens_params_nested/infer', {
      parameters: { temperature: 'cold', top_k: 3 },
      inputs: [{ name: 'X', datatype: 'FP32', shape: [1], data: [1] }],
    });
    expect(status).toBe(200);
    expect(JSON.parse(json.outputs[0].data[0])).toMatchObject({ temperature: 'cold', top_k: 3 });
  });
});
