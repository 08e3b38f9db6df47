// build-models.ts and onnx-builder.ts: deterministic bytes, models that load
// in ONNX Runtime with the shapes their config.pbtxt files declare.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
import { BUNDLED_MODELS, buildModels, modelPath, REPO_DIR } from '../../model_repository/build-models.ts';
import { prng } from '../../model_repository/onnx-builder.ts';
import { buildSimple, writeTestRepository } from '../fixtures/test-models.ts';

const tmp = mkdtempSync(path.join(tmpdir(), 'build-models-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const sha = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');
const opts: ort.InferenceSession.SessionOptions = { intraOpNumThreads: 1, interOpNumThreads: 1 };

function seeded(n: number, seed: number): Float32Array {
  const r = prng(seed);
  return Float32Array.from({ length: n }, () => r() * 4 - 2);
}

async function run(name: string, repo: string, input: string, dims: number[]) {
  const s = await ort.InferenceSession.create(modelPath(repo, name), opts);
  try {
    const n = dims.reduce((a, b) => a * b, 1);
    return await s.run({ [input]: new ort.Tensor('float32', seeded(n, 42), dims) });
  } finally {
    await s.release();
  }
}

describe('build-models', () => {
  const a = path.join(tmp, 'a');
  const b = path.join(tmp, 'b');
  const first = buildModels({ repo: a });
  buildModels({ repo: b });

  it('writes every bundled model with identical bytes on each build', () => {
    expect(first.map((r) => r.name).sort()).toEqual(Object.keys(BUNDLED_MODELS).sort());
    for (const r of first) {
      expect(r.skipped).toBe(false);
      expect(sha(modelPath(a, r.name))).toBe(r.sha256);
      expect(sha(modelPath(b, r.name))).toBe(r.sha256);
    }
  });

  it('counts at least 0.3 GFLOP per image for the encoder', () => {
    const enc = first.find((r) => r.name === 'clip_encoder_model')!;
    expect(enc.gflops).toBeGreaterThanOrEqual(0.3);
    expect(enc.gflops).toBeLessThan(1);
  });

  it('--if-missing keeps existing files, rebuilds missing ones', () => {
    const enc = modelPath(a, 'clip_encoder_model');
    writeFileSync(enc, 'placeholder');
    rmSync(modelPath(a, 'harmful_filter_model'));
    const res = buildModels({ repo: a, ifMissing: true });
    expect(res.find((r) => r.name === 'clip_encoder_model')!.skipped).toBe(true);
    expect(readFileSync(enc, 'utf8')).toBe('placeholder');
    expect(res.find((r) => r.name === 'harmful_filter_model')!.skipped).toBe(false);
    expect(sha(modelPath(a, 'harmful_filter_model'))).toBe(sha(modelPath(b, 'harmful_filter_model')));
  });

  it('runs as a script with --repo and prints GFLOPs and sizes', () => {
    const c = path.join(tmp, 'c');
    const out = execFileSync(process.execPath, ['--import', 'tsx', path.join(REPO_DIR, 'build-models.ts'), '--repo', c], {
      encoding: 'utf8',
    });
    expect(out).toMatch(/clip_encoder_model: 0\.3\d+ GFLOP\/sample, [\d.]+ KiB/);
    expect(statSync(modelPath(c, 'product_recommender_model')).size).toBeGreaterThan(1000);
    expect(sha(modelPath(c, 'clip_encoder_model'))).toBe(sha(modelPath(b, 'clip_encoder_model')));
  });

  it('clip_encoder_model: [batch,3,224,224] -> unit-norm [batch,512], distinct per image', async () => {
    const out = await run('clip_encoder_model', b, 'pixel_values', [3, 3, 224, 224]);
    const e = out.image_embeds;
    expect(e.dims).toEqual([3, 512]);
    const d = e.data as Float32Array;
    for (let r = 0; r < 3; r++) {
      const row = d.subarray(r * 512, (r + 1) * 512);
      expect(row.every(Number.isFinite)).toBe(true);
      expect(Math.hypot(...row)).toBeCloseTo(1, 4);
    }
    let dot = 0;
    for (let i = 0; i < 512; i++) dot += d[i] * d[512 + i];
    expect(dot).toBeLessThan(0.99999);
  });

  it('harmful_filter_model: [batch,2] probabilities summing to 1', async () => {
    const out = await run('harmful_filter_model', b, 'pixel_values', [2, 3, 224, 224]);
    expect(out.probabilities.dims).toEqual([2, 2]);
    const p = out.probabilities.data as Float32Array;
    for (let r = 0; r < 2; r++) {
      expect(p[2 * r]).toBeGreaterThan(0);
      expect(p[2 * r + 1]).toBeGreaterThan(0);
      expect(p[2 * r] + p[2 * r + 1]).toBeCloseTo(1, 5);
    }
  });

  it('product_recommender_model: [batch,64] -> scores in (0,1) [batch,100]', async () => {
    const out = await run('product_recommender_model', b, 'user_features', [5, 64]);
    expect(out.scores.dims).toEqual([5, 100]);
    const s = out.scores.data as Float32Array;
    expect(s.every((x) => x > 0 && x < 1)).toBe(true);
    expect(new Set(s).size).toBeGreaterThan(100);
  });

  it('bundled config.pbtxt files name the tensors the ONNX files have', async () => {
    for (const r of first) {
      const cfg = readFileSync(path.join(REPO_DIR, r.name, 'config.pbtxt'), 'utf8');
      const s = await ort.InferenceSession.create(modelPath(b, r.name), opts);
      for (const n of [...s.inputNames, ...s.outputNames]) expect(cfg).toContain(`name: "${n}"`);
      await s.release();
    }
  });
});

describe('onnx-builder test models', () => {
  it('simple: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1, same bytes each build', async () => {
    expect(Buffer.from(buildSimple()).equals(Buffer.from(buildSimple()))).toBe(true);
    const repo = writeTestRepository(path.join(tmp, 'tests'), ['simple']);
    const s = await ort.InferenceSession.create(path.join(repo, 'simple', '1', 'model.onnx'), opts);
    const x = Int32Array.from({ length: 32 }, (_, i) => i * 7 - 50);
    const y = Int32Array.from({ length: 32 }, (_, i) => 100 - i);
    const out = await s.run({ INPUT0: new ort.Tensor('int32', x, [2, 16]), INPUT1: new ort.Tensor('int32', y, [2, 16]) });
    expect(Array.from(out.OUTPUT0.data as Int32Array)).toEqual(Array.from(x, (v, i) => v + y[i]));
    expect(Array.from(out.OUTPUT1.data as Int32Array)).toEqual(Array.from(x, (v, i) => v - y[i]));
    await s.release();
  });
});
