// ocr_det_preprocess: a JS function model. JPEG/PNG bytes -> PP-OCRv4
// detector input and the decoded image the recognizer crops from.
//
// PaddleOCR's detection preprocessing (DetResizeForTest, limit_type 'max'):
// scale so the longest side is at most limit_side_len (never up), round each
// side to a multiple of 32 (at least 32), bilinear resize; then
// (x/255 - mean)/std with ImageNet's mean/std applied to the channels in
// B, G, R order (PaddleOCR reads images with OpenCV, BGR, and its models were
// trained that way). Imports nothing from the project.
import sharp from 'sharp';

const INPUT = 'image_bytes';
const MEAN = [0.485, 0.456, 0.406] as const;
const STD = [0.229, 0.224, 0.225] as const;

interface InTensor {
  datatype: string;
  shape: number[];
  data: Uint8Array;
}
interface JsRequest {
  inputs: Record<string, InTensor>;
}
type JsResponse =
  | { outputs: Record<string, { datatype: string; shape: number[]; data: ArrayBufferView }> }
  | { error: { code: 'INVALID_ARG' | 'INTERNAL'; message: string } };

let limitSide = 960;
let maxSourceSide = 2880;

class InvalidImage extends Error {}

/** Detector input size for a source of w x h: longest side <= limit, multiples of 32. */
export function detSize(w: number, h: number, limit: number): { w: number; h: number } {
  const ratio = Math.max(w, h) > limit ? limit / Math.max(w, h) : 1;
  const round32 = (v: number) => Math.max(32, Math.round(v / 32) * 32);
  return { w: round32(Math.trunc(w * ratio)), h: round32(Math.trunc(h * ratio)) };
}

/** Decode to 3-channel sRGB pixels (EXIF-rotated, alpha flattened on white, longest side <= maxSide); also the full size. */
async function decode(bytes: Uint8Array, maxSide: number): Promise<{ rgb: Buffer; w: number; h: number; fullW: number; fullH: number }> {
  try {
    const meta = await sharp(bytes).metadata();
    // EXIF orientations 5-8 turn the image by 90°: width and height swap.
    const turned = (meta.orientation ?? 1) >= 5;
    const fullW = (turned ? meta.height : meta.width) ?? 0;
    const fullH = (turned ? meta.width : meta.height) ?? 0;
    const { data, info } = await sharp(bytes)
      .rotate()
      .resize(maxSide, maxSide, { fit: 'inside', withoutEnlargement: true, kernel: 'linear' })
      .flatten({ background: '#ffffff' })
      .toColourspace('srgb')
      .raw()
      .toBuffer({ resolveWithObject: true });
    if (info.channels !== 3) throw new Error(`decoded to ${info.channels} channels, expected 3`);
    return { rgb: data, w: info.width, h: info.height, fullW: fullW || info.width, fullH: fullH || info.height };
  } catch (e) {
    throw new InvalidImage((e as Error).message);
  }
}

/** The detector's input [3, H, W] (BGR planes, normalized) and the source as BGR [h, w, 3]. */
export async function preprocess(
  bytes: Uint8Array,
): Promise<{ det: Float32Array; detW: number; detH: number; bgr: Uint8Array; w: number; h: number; fullW: number; fullH: number }> {
  const { rgb, w, h, fullW, fullH } = await decode(bytes, maxSourceSide);
  const size = detSize(w, h, limitSide);
  const resized = await sharp(rgb, { raw: { width: w, height: h, channels: 3 } })
    .resize(size.w, size.h, { fit: 'fill', kernel: 'linear' })
    .raw()
    .toBuffer();
  const plane = size.w * size.h;
  const det = new Float32Array(3 * plane);
  // Plane c holds BGR channel c, i.e. RGB channel 2 - c.
  for (let c = 0; c < 3; c++) {
    const scale = 1 / (255 * STD[c]!);
    const offset = -MEAN[c]! / STD[c]!;
    const src = 2 - c;
    const base = c * plane;
    for (let i = 0; i < plane; i++) det[base + i] = resized[i * 3 + src]! * scale + offset;
  }
  const bgr = new Uint8Array(rgb.length);
  for (let i = 0; i < rgb.length; i += 3) {
    bgr[i] = rgb[i + 2]!;
    bgr[i + 1] = rgb[i + 1]!;
    bgr[i + 2] = rgb[i]!;
  }
  return { det, detW: size.w, detH: size.h, bgr, w, h, fullW, fullH };
}

async function one(req: JsRequest): Promise<JsResponse> {
  const t = req.inputs[INPUT];
  if (!t || t.datatype !== 'UINT8' || t.data.byteLength === 0) {
    const why = !t ? 'is missing' : t.datatype !== 'UINT8' ? `must be UINT8, got ${t.datatype}` : 'is empty';
    return { error: { code: 'INVALID_ARG', message: `ocr_det_preprocess: input '${INPUT}' ${why}` } };
  }
  try {
    const p = await preprocess(t.data);
    return {
      outputs: {
        det_input: { datatype: 'FP32', shape: [3, p.detH, p.detW], data: p.det },
        image_bgr: { datatype: 'UINT8', shape: [p.h, p.w, 3], data: p.bgr },
        image_size: { datatype: 'INT32', shape: [2], data: Int32Array.of(p.fullH, p.fullW) },
      },
    };
  } catch (e) {
    if (e instanceof InvalidImage) {
      return {
        error: { code: 'INVALID_ARG', message: `ocr_det_preprocess: input '${INPUT}' is not a decodable JPEG/PNG image: ${e.message}` },
      };
    }
    return { error: { code: 'INTERNAL', message: `ocr_det_preprocess: ${(e as Error).message}` } };
  }
}

export async function initialize(ctx: { config: { parameters?: Record<string, { string_value?: string }> } }): Promise<void> {
  const p = (k: string) => Number(ctx.config.parameters?.[k]?.string_value);
  if (p('limit_side_len') > 0) limitSide = p('limit_side_len');
  if (p('max_source_side') > 0) maxSourceSide = p('max_source_side');
  // As image_preprocess_model: images in parallel on libuv's pool, no operation cache.
  sharp.concurrency(1);
  sharp.cache(false);
}

/** One response per request, in order; a bad image fails only its own request. */
export async function execute(requests: JsRequest[]): Promise<JsResponse[]> {
  return Promise.all(requests.map(one));
}
