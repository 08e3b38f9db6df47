// image_preprocess_model (JS function model): CLIP preprocessing of JPEG/PNG
// bytes, per-request errors for bad images.
import sharp from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';
import { execute, initialize, MEAN, preprocess, STD, type JsRequest } from '../../model_repository/image_preprocess_model/1/model.ts';
import { makeGreyPng, makeJpeg, makeLargeJpeg, makePng, makeSolid } from '../fixtures/images.ts';

const PLANE = 224 * 224;
const norm = (v: number, c: number) => (v / 255 - MEAN[c]) / STD[c];
const req = (data: Uint8Array, datatype = 'UINT8'): JsRequest => ({
  inputs: { image_bytes: { datatype, shape: [data.byteLength], data } },
  requestedOutputs: ['preprocessed_tensor'],
  parameters: {},
});

function channelStats(t: Float32Array, c: number) {
  const p = t.subarray(c * PLANE, (c + 1) * PLANE);
  let min = Infinity;
  let max = -Infinity;
  for (const v of p) {
    min = Math.min(min, v);
    max = Math.max(max, v);
  }
  return { min, max };
}

beforeAll(async () => {
  await initialize({ config: {}, modelName: 'image_preprocess_model', version: '1', modelDir: '.', instanceName: 'test_0' });
});

describe('image_preprocess_model', () => {
  it('turns a JPEG into FP32 [3,224,224], same as preprocess()', async () => {
    const jpg = await makeJpeg(640, 480, 1);
    const [res] = await execute([req(jpg)]);
    if (!('outputs' in res)) throw new Error(res.error.message);
    const t = res.outputs.preprocessed_tensor;
    expect(t.datatype).toBe('FP32');
    expect(t.shape).toEqual([3, 224, 224]);
    expect(t.data).toBeInstanceOf(Float32Array);
    expect((t.data as Float32Array).length).toBe(3 * PLANE);
    expect(Buffer.from((t.data as Float32Array).buffer).equals(Buffer.from((await preprocess(jpg)).buffer))).toBe(true);
    // a gradient image: values vary within each channel and stay in CLIP's range
    for (let c = 0; c < 3; c++) {
      const { min, max } = channelStats(t.data as Float32Array, c);
      expect(max - min).toBeGreaterThan(0.5);
      expect(min).toBeGreaterThanOrEqual(norm(0, c) - 1e-5);
      expect(max).toBeLessThanOrEqual(norm(255, c) + 1e-5);
    }
  });

  it('normalizes a pure red PNG exactly per channel', async () => {
    const t = await preprocess(await makeSolid(300, 200, [255, 0, 0]));
    const expected = [(1 - MEAN[0]) / STD[0], -MEAN[1] / STD[1], -MEAN[2] / STD[2]];
    for (let c = 0; c < 3; c++) {
      const { min, max } = channelStats(t, c);
      expect(min).toBeCloseTo(expected[c], 4);
      expect(max).toBeCloseTo(expected[c], 4);
    }
  });

  it('normalizes a pure red JPEG within JPEG error', async () => {
    const t = await preprocess(await makeSolid(256, 256, [255, 0, 0], 'jpeg'));
    expect(Math.abs(t[PLANE / 2] - (1 - MEAN[0]) / STD[0])).toBeLessThan(0.05);
    expect(Math.abs(t[PLANE + PLANE / 2] - -MEAN[1] / STD[1])).toBeLessThan(0.05);
  });

  it('expands greyscale to three channels', async () => {
    const t = await preprocess(await makeGreyPng(100, 120, 128));
    for (let c = 0; c < 3; c++) expect(t[c * PLANE + 1000]).toBeCloseTo(norm(128, c), 3);
  });

  it('drops alpha from an RGBA PNG', async () => {
    const withAlpha = await preprocess(await makePng(320, 240, 5, true));
    const without = await preprocess(await makePng(320, 240, 5, false));
    expect(withAlpha.length).toBe(3 * PLANE);
    // sharp resizes in premultiplied space (8-bit rounding at alpha 200):
    // a few steps of error, but colours are not darkened towards black.
    let worst = 0;
    for (let i = 0; i < withAlpha.length; i++) worst = Math.max(worst, Math.abs(withAlpha[i] - without[i]));
    expect(worst).toBeLessThan(6 / 255 / Math.min(...STD));
  });

  it('resizes the shortest side to 224 and crops the centre', async () => {
    // 672x224: red | green | blue thirds; the centre crop is the green third.
    const w = 672;
    const px = Buffer.alloc(w * 224 * 3);
    for (let y = 0; y < 224; y++) for (let x = 0; x < w; x++) px[(y * w + x) * 3 + Math.floor(x / 224)] = 255;
    const png = await sharp(px, { raw: { width: w, height: 224, channels: 3 } })
      .png()
      .toBuffer();
    const t = await preprocess(png);
    const centre = 112 * 224 + 112;
    expect(t[centre]).toBeCloseTo(norm(0, 0), 3);
    expect(t[PLANE + centre]).toBeCloseTo(norm(255, 1), 3);
    expect(t[2 * PLANE + centre]).toBeCloseTo(norm(0, 2), 3);
    // 1344x448 of the same layout scales down by 2 to the same picture
    const big = await sharp(png).resize(1344, 448, { kernel: 'nearest' }).png().toBuffer();
    const t2 = await preprocess(big);
    expect(t2[PLANE + centre]).toBeCloseTo(norm(255, 1), 2);
  });

  it('handles a multi-megabyte JPEG', async () => {
    const big = await makeLargeJpeg(2_000_000);
    expect(big.byteLength).toBeGreaterThanOrEqual(2_000_000);
    expect((await preprocess(big)).length).toBe(3 * PLANE);
  });

  it('answers corrupt bytes with INVALID_ARG for that request only', async () => {
    const good = await makeJpeg(300, 300, 2);
    const truncated = good.subarray(0, good.length >> 1);
    const res = await execute([req(new Uint8Array([1, 2, 3, 4, 5])), req(good), req(truncated), req(good, 'FP32')]);
    expect(res).toHaveLength(4);
    const [bad, ok, trunc, wrongType] = res;
    expect(bad).toEqual({
      error: {
        code: 'INVALID_ARG',
        message: expect.stringMatching(/^image_preprocess_model: input 'image_bytes' is not a decodable JPEG\/PNG image: .+/),
      },
    });
    expect('outputs' in ok && ok.outputs.preprocessed_tensor.shape).toEqual([3, 224, 224]);
    expect('error' in trunc && trunc.error.code).toBe('INVALID_ARG');
    expect('error' in wrongType && wrongType.error.message).toMatch(/must be UINT8, got FP32/);
    const [empty] = await execute([req(new Uint8Array(0))]);
    expect('error' in empty && empty.error.code).toBe('INVALID_ARG');
  });

  it('gives the same tensors when requests run concurrently', async () => {
    const imgs = await Promise.all([1, 2, 3, 4].map((s) => makeJpeg(400, 300, s)));
    const res = await execute(imgs.map((b) => req(b)));
    for (let i = 0; i < imgs.length; i++) {
      const r = res[i];
      if (!('outputs' in r)) throw new Error(r.error.message);
      const alone = await preprocess(imgs[i]);
      expect(Buffer.from((r.outputs.preprocessed_tensor.data as Float32Array).buffer).equals(Buffer.from(alone.buffer))).toBe(true);
    }
    // distinct seeds give distinct images
    const a = (res[0] as { outputs: Record<string, { data: ArrayBufferView }> }).outputs.preprocessed_tensor.data as Float32Array;
    const b = (res[1] as { outputs: Record<string, { data: ArrayBufferView }> }).outputs.preprocessed_tensor.data as Float32Array;
    expect(a.some((v, i) => Math.abs(v - b[i]) > 0.1)).toBe(true);
  });
});
