// The seed's image_preprocess_model as model.py, decoding real JPEGs with
// Pillow: the model pins Debian's /usr/bin/python3 (python3-pil and
// python3-numpy from apt) with EXECUTION_ENV_PATH, since the python3 on PATH
// here has numpy but no Pillow. Its tensor is checked against the JS
// image_preprocess_model's on the same JPEG within a decoder tolerance (and
// the test checks that tolerance rejects a wrong normalization, channel
// order, layout or crop), and it runs as the first step of a copy of
// search_pipeline_ensemble in place of the JS one. Skipped, saying why, only
// when /usr/bin/python3 lacks Pillow or numpy.
import { execFileSync } from 'node:child_process';
import { cpSync, readFileSync, readlinkSync, realpathSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import type { PythonInstance } from '../../engine/backends/python/python-instance.ts';
import { makeJpeg } from '../fixtures/images.ts';
import { BUNDLED_REPO, toF32, type ProtoClient } from './helpers.ts';
import { EXAMPLES, pythonEngine, pythonRepo } from './python-support.ts';

const DEBIAN_PYTHON = '/usr/bin/python3';
const missing = (() => {
  try {
    execFileSync(DEBIAN_PYTHON, ['-c', 'import PIL, numpy'], { stdio: 'pipe' });
    return '';
  } catch (e) {
    return `${DEBIAN_PYTHON} cannot import PIL and numpy (${String((e as { stderr?: Buffer }).stderr ?? e)
      .trim()
      .split('\n')
      .pop()}); apt-get install -y python3-pil python3-numpy`;
  }
})();
if (missing) console.warn(`L0_python_pillow skipped: ${missing}`);

/** Largest |a-b|, mean |a-b| and the 99th percentile of |a-b|. */
function diffStats(a: Float32Array, b: Float32Array): { max: number; mean: number; p99: number } {
  const d = Array.from(a, (x, i) => Math.abs(x - b[i]!)).sort((x, y) => x - y);
  return { max: d[d.length - 1]!, mean: d.reduce((s, x) => s + x, 0) / d.length, p99: d[Math.floor(d.length * 0.99)]! };
}

function cosine(a: Float32Array, b: Float32Array): number {
  let ab = 0,
    aa = 0,
    bb = 0;
  for (let i = 0; i < a.length; i++) {
    ab += a[i]! * b[i]!;
    aa += a[i]! * a[i]!;
    bb += b[i]! * b[i]!;
  }
  return ab / Math.sqrt(aa * bb);
}

/**
 * Same pixels within decoder tolerance. One 8-bit level is 1/(255*0.27) ≈ 0.015 after
 * normalization; both sides decode with libjpeg-turbo (identical on an unresized image),
 * the bicubic kernels differ a little: measured mean 0.006, p99 0.029, max 0.060.
 */
const close = (d: { max: number; mean: number; p99: number }) => d.mean < 0.015 && d.p99 < 0.05 && d.max < 0.1;

/** The JS tensor as a model.py with one mistake would produce it. */
function wrongVariants(chw: Float32Array): Record<string, Float32Array> {
  const P = 224 * 224;
  const MEAN = [0.48145466, 0.4578275, 0.40821073];
  const STD = [0.26862954, 0.26130258, 0.27577711];
  const map = (f: (c: number, y: number, x: number) => number) => {
    const out = new Float32Array(3 * P);
    for (let c = 0; c < 3; c++) for (let y = 0; y < 224; y++) for (let x = 0; x < 224; x++) out[c * P + y * 224 + x] = f(c, y, x);
    return out;
  };
  const at = (c: number, y: number, x: number) => chw[c * P + y * 224 + x]!;
  return {
    'BGR instead of RGB': map((c, y, x) => at(2 - c, y, x)),
    'HWC instead of CHW': map((c, y, x) => chw[(y * 224 + x) * 3 + c]!),
    'no std division': map((c, y, x) => at(c, y, x) * STD[c]!),
    "ImageNet mean/std instead of CLIP's": map(
      (c, y, x) => (at(c, y, x) * STD[c]! + MEAN[c]! - [0.485, 0.456, 0.406][c]!) / [0.229, 0.224, 0.225][c]!,
    ),
    'crop one pixel off': map((c, y, x) => at(c, y, Math.min(223, x + 1))),
  };
}

let eng: RunningEngine;
let client: ProtoClient;

async function infer(model: string, input: string, bytes: Buffer): Promise<{ shape: number[]; data: Float32Array }> {
  const res = await client.call('ModelInfer', {
    model_name: model,
    inputs: [{ name: input, datatype: 'UINT8', shape: [bytes.length] }],
    raw_input_contents: [bytes],
  });
  return { shape: res.outputs[0].shape.map(Number), data: toF32(res.raw_output_contents[0]) };
}

describe.skipIf(!!missing)('L0_python_pillow: model.py decodes JPEGs with Pillow under /usr/bin/python3', () => {
  pythonEngine(
    () => {
      // The JS preprocessing and the bundled pipeline as they ship, plus the model.py
      // one as py_image_preprocess_model and a pipeline that uses it.
      const dir = pythonRepo('l0-python-pil', [], {}, ['clip_encoder_model', 'image_preprocess_model', 'search_pipeline_ensemble']);
      const py = path.join(dir, 'py_image_preprocess_model');
      cpSync(path.join(EXAMPLES, 'image_preprocess_model'), py, { recursive: true });
      const cfg = readFileSync(path.join(py, 'config.pbtxt'), 'utf8').replace(
        'name: "image_preprocess_model"',
        'name: "py_image_preprocess_model"',
      );
      writeFileSync(
        path.join(py, 'config.pbtxt'),
        `${cfg}\nparameters { key: "EXECUTION_ENV_PATH" value: { string_value: "${DEBIAN_PYTHON}" } }\n`,
      );
      const pipe = path.join(dir, 'py_search_pipeline_ensemble');
      cpSync(path.join(BUNDLED_REPO, 'search_pipeline_ensemble'), pipe, { recursive: true });
      const ens = readFileSync(path.join(pipe, 'config.pbtxt'), 'utf8')
        .replace('name: "search_pipeline_ensemble"', 'name: "py_search_pipeline_ensemble"')
        .replace('model_name: "image_preprocess_model"', 'model_name: "py_image_preprocess_model"');
      expect(ens).toContain('py_image_preprocess_model');
      writeFileSync(path.join(pipe, 'config.pbtxt'), ens);
      return dir;
    },
    (s) => ({ eng, client } = s),
  );

  it("loads READY, its stub running Debian's interpreter", () => {
    const m = eng.server.repositoryIndex(false).find((x) => x.name === 'py_image_preprocess_model')!;
    expect(`${m.state} ${m.reason ?? ''}`.trim()).toBe('READY');
    const [stub] = eng.engine.repository.readyVersion('py_image_preprocess_model')!.backend.instances as unknown as PythonInstance[];
    expect(readlinkSync(`/proc/${stub!.pid}/exe`)).toBe(realpathSync(DEBIAN_PYTHON));
  });

  it("decodes real JPEGs to the JS model's tensor within decoder tolerance", async () => {
    // Landscape and portrait, each with an odd crop margin (299 and 358 px after the resize).
    for (const [w, h, seed] of [
      [320, 240, 3],
      [250, 400, 9],
    ] as const) {
      const jpeg = await makeJpeg(w, h, seed);
      const js = await infer('image_preprocess_model', 'image_bytes', jpeg);
      const py = await infer('py_image_preprocess_model', 'image_bytes', jpeg);
      expect(py.shape).toEqual([3, 224, 224]);
      expect(py.shape).toEqual(js.shape);
      const d = diffStats(py.data, js.data);
      expect(close(d), `${w}x${h}: ${JSON.stringify(d)}`).toBe(true);
      // The tolerance tells a wrong normalization, channel order, layout or crop apart.
      for (const [what, wrong] of Object.entries(wrongVariants(js.data))) expect(close(diffStats(py.data, wrong)), what).toBe(false);
    }
  });

  it('runs as the preprocessing step of a copy of search_pipeline_ensemble', async () => {
    const jpeg = await makeJpeg(300, 260, 21);
    const js = await infer('search_pipeline_ensemble', 'RAW_IMAGE', jpeg);
    const py = await infer('py_search_pipeline_ensemble', 'RAW_IMAGE', jpeg);
    const other = await infer('search_pipeline_ensemble', 'RAW_IMAGE', await makeJpeg(300, 260, 22));
    expect(py.shape).toEqual([512]);
    expect(py.shape).toEqual(js.shape);
    // Close to the JS pipeline's vector, and much closer than another image's.
    // Measured: 1 - cosine ≈ 4e-7 to the JS pipeline's vector, ≈ 9e-3 to another image's.
    expect(cosine(py.data, js.data)).toBeGreaterThan(0.99999);
    expect(1 - cosine(py.data, js.data)).toBeLessThan((1 - cosine(other.data, js.data)) / 100);
  });
});
