// The OCR raw ceiling: the same two PP-OCRv4 ONNX files run in this process
// by a plain loop, one image at a time, with the pipeline's own processing
// functions (imported from the model files) and the engine's session
// settings (2 intra-op threads, no spinning): decode + detector input ->
// detector -> DB boxes -> crops in batches of 8 -> recognizer -> CTC. No
// engine, no gRPC, no ensemble, no batching across images.
import fs from 'node:fs';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { preprocess } from '../../model_repository/ocr_det_preprocess/1/model.ts';
import { cropBatch } from '../../model_repository/ocr_recognize/1/crop.ts';
import { characterClasses, ctcGreedy } from '../../model_repository/ocr_recognize/1/ctc-decode.ts';
import { detectBoxes } from '../../model_repository/ocr_recognize/1/db-postprocess.ts';
import { newHistogram, recordMs, summarize, type LoadResult } from './load-generator.ts';

const OPTIONS = {
  intraOpNumThreads: 2,
  interOpNumThreads: 1,
  executionMode: 'sequential',
  graphOptimizationLevel: 'all',
  executionProviders: ['cpu'],
  extra: { session: { intra_op: { allow_spinning: '0' }, inter_op: { allow_spinning: '0' } } },
} as const;

/** Sequential OCR of `images` (round robin) for the window; checks each result with `check`. */
export async function rawOcr(
  repo: string,
  images: Buffer[],
  warmupMs: number,
  durationMs: number,
  check: (lines: string[], i: number) => void,
): Promise<LoadResult> {
  const opts = OPTIONS as unknown as ort.InferenceSession.SessionOptions;
  const det = await ort.InferenceSession.create(path.join(repo, 'ocr_det_model/1/model.onnx'), opts);
  const rec = await ort.InferenceSession.create(path.join(repo, 'ocr_rec_model/1/model.onnx'), opts);
  const classes = characterClasses(fs.readFileSync(path.join(repo, 'ocr_recognize/ppocr_keys_v1.txt'), 'utf8'));
  const one = async (img: Buffer): Promise<string[]> => {
    const p = await preprocess(img);
    const prob = (await det.run({ x: new ort.Tensor('float32', p.det, [1, 3, p.detH, p.detW]) }))['sigmoid_0.tmp_0']!;
    const boxes = detectBoxes(prob.data as Float32Array, p.detW, p.detH, p.w, p.h);
    const lines: string[] = [];
    for (let i = 0; i < boxes.length; i += 8) {
      const quads = boxes.slice(i, i + 8).map((b) => b.quad);
      const { data, width } = cropBatch({ data: p.bgr, w: p.w, h: p.h }, quads);
      const out = (await rec.run({ x: new ort.Tensor('float32', data, [quads.length, 3, 48, width]) }))['softmax_11.tmp_0']!;
      const [, steps, n] = out.dims as [number, number, number];
      for (let k = 0; k < quads.length; k++) {
        const r = ctcGreedy(out.data as Float32Array, k * steps * n, steps, classes);
        if (r.confidence >= 0.5 && r.text) lines.push(r.text);
      }
    }
    return lines;
  };
  try {
    const h = newHistogram();
    const t0 = performance.now();
    let seq = 0;
    let done = 0;
    while (performance.now() - t0 < warmupMs + durationMs) {
      const i = seq++ % images.length;
      const s = performance.now();
      check(await one(images[i]!), i);
      if (s - t0 >= warmupMs) {
        recordMs(h, performance.now() - s);
        done++;
      }
    }
    return summarize(h, done, 0, (performance.now() - t0 - warmupMs) / 1000);
  } finally {
    await det.release();
    await rec.release();
  }
}
