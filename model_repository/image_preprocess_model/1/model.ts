// image_preprocess_model: a JS function model (the project's counterpart of
// Triton's Python backend). JPEG/PNG bytes -> CLIP-normalized CHW float32
// [3,224,224]. The engine's js backend loads this file (js-module-loader.ts)
// and calls initialize / execute / finalize; execute is never called twice at
// once on one instance, but the requests inside one call run concurrently on
// sharp's libuv threads. Imports nothing from the project.
import sharp from 'sharp';

/** CLIP (ViT-B/32) input size and per-channel RGB normalization. */
export const SIZE = 224;
export const MEAN = [0.48145466, 0.4578275, 0.40821073] as const;
export const STD = [0.26862954, 0.26130258, 0.27577711] as const;

const INPUT = 'image_bytes';
const OUTPUT = 'preprocessed_tensor';

interface InTensor {
  datatype: string;
  shape: number[];
  data: Uint8Array;
}
interface OutTensor {
  datatype: string;
  shape: number[];
  data: ArrayBufferView;
}
export interface JsRequest {
  inputs: Record<string, InTensor>;
  requestedOutputs: string[];
  parameters: Record<string, unknown>;
}
export type JsResponse = { outputs: Record<string, OutTensor> } | { error: { code: 'INVALID_ARG' | 'INTERNAL'; message: string } };

class InvalidImage extends Error {}

// value/255 -> (value/255 - mean)/std folded into one multiply-add per channel.
const SCALE = STD.map((s) => 1 / (255 * s));
const OFFSET = MEAN.map((m, c) => -m / STD[c]);

/**
 * Decode, resize the shortest side to 224 (bicubic), center-crop 224x224,
 * force 3-channel sRGB, normalize with CLIP's mean/std, lay out CHW.
 * Rejects with InvalidImage when the bytes are not a decodable image.
 */
export async function preprocess(bytes: Uint8Array): Promise<Float32Array> {
  let pixels: Buffer;
  try {
    const { data, info } = await sharp(bytes)
      // fit 'cover' scales so the shortest side is 224, then crops the centre.
      .resize(SIZE, SIZE, { fit: 'cover', position: 'centre', kernel: 'cubic' })
      .removeAlpha()
      .toColourspace('srgb')
      .raw()
      .toBuffer({ resolveWithObject: true });
    if (info.width !== SIZE || info.height !== SIZE || info.channels !== 3) {
      throw new Error(`decoded to ${info.width}x${info.height}x${info.channels}, expected ${SIZE}x${SIZE}x3`);
    }
    pixels = data;
  } catch (e) {
    throw new InvalidImage((e as Error).message);
  }
  const plane = SIZE * SIZE;
  const out = new Float32Array(3 * plane);
  for (let c = 0; c < 3; c++) {
    const s = SCALE[c];
    const o = OFFSET[c];
    const base = c * plane;
    for (let i = 0; i < plane; i++) out[base + i] = pixels[i * 3 + c] * s + o;
  }
  return out;
}

async function one(req: JsRequest): Promise<JsResponse> {
  const t = req.inputs[INPUT];
  if (!t) return { error: { code: 'INVALID_ARG', message: `image_preprocess_model: missing input '${INPUT}'` } };
  if (t.datatype !== 'UINT8') {
    return { error: { code: 'INVALID_ARG', message: `image_preprocess_model: input '${INPUT}' must be UINT8, got ${t.datatype}` } };
  }
  if (t.data.byteLength === 0) {
    return { error: { code: 'INVALID_ARG', message: `image_preprocess_model: input '${INPUT}' is empty` } };
  }
  try {
    const data = await preprocess(t.data);
    return { outputs: { [OUTPUT]: { datatype: 'FP32', shape: [3, SIZE, SIZE], data } } };
  } catch (e) {
    if (e instanceof InvalidImage) {
      return {
        error: {
          code: 'INVALID_ARG',
          message: `image_preprocess_model: input '${INPUT}' is not a decodable JPEG/PNG image: ${e.message}`,
        },
      };
    }
    return { error: { code: 'INTERNAL', message: `image_preprocess_model: ${(e as Error).message}` } };
  }
}

export async function initialize(_ctx: {
  config: unknown;
  modelName: string;
  version: string;
  modelDir: string;
  instanceName: string;
}): Promise<void> {
  // One libvips worker thread per image: images are processed concurrently on
  // libuv's pool (4 threads) instead, which on a 2-core host already fills the
  // cores; libvips' own per-image threading on top would oversubscribe them.
  // The setting is process-wide, so every instance sets the same value.
  sharp.concurrency(1);
  // Inputs are never repeated: the operation cache would only hold memory.
  sharp.cache(false);
}

/** One response per request, in order; a bad image fails only its own request. */
export async function execute(requests: JsRequest[]): Promise<JsResponse[]> {
  return Promise.all(requests.map(one));
}

export async function finalize(): Promise<void> {}
