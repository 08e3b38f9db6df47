// Triton's classification extension over gRPC and HTTP: an output asked for
// with `classification: k` comes back as its top-k "value:index[:label]".
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BUNDLED_REPO,
  decodeBytesTensor,
  f32Bytes,
  httpJson,
  protoLoaderClient,
  seededFloats,
  startTestEngine,
  toF32,
  type ProtoClient,
} from './helpers.ts';
import type { RunningEngine } from '../../engine/server/server.ts';

let eng: RunningEngine;
let client: ProtoClient;
const pixels = seededFloats(2 * 3 * 224 * 224, 7);

/** [p_safe, p_harmful] per row, as the model returns them. */
async function probabilities(): Promise<Float32Array> {
  const r = await client.call('ModelInfer', {
    model_name: 'harmful_filter_model',
    inputs: [{ name: 'pixel_values', datatype: 'FP32', shape: [2, 3, 224, 224] }],
    raw_input_contents: [f32Bytes(pixels)],
  });
  return toF32(r.raw_output_contents[0]);
}

/** Triton's class string: the value as std::to_string writes a float ("%f"), the index, the label. */
function expected(p: Float32Array, row: number): string {
  const [a, b] = [p[row * 2]!, p[row * 2 + 1]!];
  return a >= b ? `${a.toFixed(6)}:0:safe` : `${b.toFixed(6)}:1:harmful`;
}

beforeAll(async () => {
  eng = await startTestEngine({ modelRepository: BUNDLED_REPO, controlMode: 'explicit', loadModels: ['harmful_filter_model'] });
  client = protoLoaderClient(eng.grpcPort);
});
afterAll(async () => {
  client?.close();
  await eng?.stop();
});

describe('L0_classification', () => {
  it('gRPC: top-1 per batch row with the label from label_filename', async () => {
    const p = await probabilities();
    const r = await client.call('ModelInfer', {
      model_name: 'harmful_filter_model',
      inputs: [{ name: 'pixel_values', datatype: 'FP32', shape: [2, 3, 224, 224] }],
      outputs: [{ name: 'probabilities', parameters: { classification: { int64_param: 1 } } }],
      raw_input_contents: [f32Bytes(pixels)],
    });
    expect(r.outputs[0].datatype).toBe('BYTES');
    expect(r.outputs[0].shape.map(Number)).toEqual([2, 1]);
    const items = decodeBytesTensor(r.raw_output_contents[0]).map((b) => b.toString());
    expect(items).toEqual([expected(p, 0), expected(p, 1)]);
  });

  it('HTTP: top-2 orders by value', async () => {
    const p = await probabilities();
    const { status, json } = await httpJson(eng.httpPort, 'POST', '/v2/models/harmful_filter_model/infer', {
      inputs: [{ name: 'pixel_values', datatype: 'FP32', shape: [2, 3, 224, 224], data: Array.from(pixels) }],
      outputs: [{ name: 'probabilities', parameters: { classification: 2 } }],
    });
    expect(status).toBe(200);
    const out = json.outputs[0];
    expect(out.datatype).toBe('BYTES');
    expect(out.shape).toEqual([2, 2]);
    const row0 = out.data.slice(0, 2) as string[];
    const values = row0.map((s) => Number(s.split(':')[0]));
    expect(values[0]).toBeGreaterThanOrEqual(values[1]!);
    expect(row0[0]).toBe(expected(p, 0));
  });

  it('a non-positive k is INVALID_ARG naming the output', async () => {
    const { status, json } = await httpJson(eng.httpPort, 'POST', '/v2/models/harmful_filter_model/infer', {
      inputs: [{ name: 'pixel_values', datatype: 'FP32', shape: [1, 3, 224, 224], data: Array.from(pixels.subarray(0, 3 * 224 * 224)) }],
      outputs: [{ name: 'probabilities', parameters: { classification: 0 } }],
    });
    expect(status).toBe(400);
    expect(json.error).toMatch(/probabilities/);
  });
});
