// Crops for the recognizer, as PaddleOCR prepares them: the box's quad is
// warped to an upright rectangle (width = longer of the top/bottom edges,
// height = longer of the left/right edges; turned 90° counter-clockwise when
// it is at least 1.5 times taller than wide), resized to height 48 keeping
// the aspect ratio, scaled to (x/255 - 0.5)/0.5 and right-padded with 0 to
// the batch's width. The warp and the resize are one sampling pass here:
// each output pixel averages a small grid of bilinear samples (a box filter
// when shrinking) from the BGR source, edges replicated. Pure functions.
import type { Point, Quad } from './db-postprocess.ts';

export const REC_HEIGHT = 48;
/** PaddleOCR's default recognizer width (rec_image_shape 3,48,320): the narrowest batch. */
export const MIN_REC_WIDTH = 320;

export interface Image {
  data: Uint8Array; // BGR, h x w x 3
  w: number;
  h: number;
}

/** The crop's upright size and corners in sampling order (after the optional turn). */
export function cropGeometry(q: Quad): { corners: Quad; w: number; h: number } {
  const d = (a: Point, b: Point) => Math.hypot(a[0] - b[0], a[1] - b[1]);
  const w = Math.max(1, Math.trunc(Math.max(d(q[0], q[1]), d(q[2], q[3]))));
  const h = Math.max(1, Math.trunc(Math.max(d(q[0], q[3]), d(q[1], q[2]))));
  // Turning the crop 90° counter-clockwise: its new top-left is the old top-right.
  if (h / w >= 1.5) return { corners: [q[1], q[2], q[3], q[0]], w: h, h: w };
  return { corners: q, w, h };
}

/** Width of a crop of w x h resized to height 48 (at least 1). */
export function scaledWidth(w: number, h: number): number {
  return Math.max(1, Math.ceil((REC_HEIGHT * w) / h));
}

/** The padded width of a batch: its widest crop, at least 320, rounded up to a multiple of 32 (so batches of different images share shapes). */
export function batchWidth(widths: number[]): number {
  const widest = Math.max(MIN_REC_WIDTH, ...widths);
  return Math.ceil(widest / 32) * 32;
}

/** Add the bilinear sample at (x, y) (edges replicated) of each channel into acc[0..2]. */
function addBilinear(img: Image, x: number, y: number, acc: Float64Array): void {
  const cx = x < 0 ? 0 : x > img.w - 1 ? img.w - 1 : x;
  const cy = y < 0 ? 0 : y > img.h - 1 ? img.h - 1 : y;
  const x0 = Math.floor(cx);
  const y0 = Math.floor(cy);
  const dx = x0 + 1 < img.w ? 3 : 0;
  const dy = y0 + 1 < img.h ? img.w * 3 : 0;
  const fx = cx - x0;
  const fy = cy - y0;
  const w00 = (1 - fx) * (1 - fy);
  const w10 = fx * (1 - fy);
  const w01 = (1 - fx) * fy;
  const w11 = fx * fy;
  const d = img.data;
  const i = (y0 * img.w + x0) * 3;
  for (let c = 0; c < 3; c++) {
    acc[c] += d[i + c]! * w00 + d[i + dx + c]! * w10 + d[i + dy + c]! * w01 + d[i + dx + dy + c]! * w11;
  }
}

/**
 * Write one normalized crop into `out` (CHW planes of REC_HEIGHT x stride at
 * `offset`): the quad sampled to outW x 48, columns outW..stride left at 0.
 */
export function writeCrop(img: Image, q: Quad, outW: number, out: Float32Array, offset: number, stride: number): void {
  const { corners, w, h } = cropGeometry(q);
  const [p0, p1, p2, p3] = corners;
  // Samples per output pixel along each axis: enough to cover the source pixels it spans.
  const kx = Math.max(1, Math.min(8, Math.ceil(w / outW)));
  const ky = Math.max(1, Math.min(8, Math.ceil(h / REC_HEIGHT)));
  const plane = REC_HEIGHT * stride;
  const norm = 1 / (kx * ky * 127.5);
  const acc = new Float64Array(3);
  for (let v = 0; v < REC_HEIGHT; v++) {
    for (let u = 0; u < outW; u++) {
      acc.fill(0);
      for (let j = 0; j < ky; j++) {
        const t = (v + (j + 0.5) / ky) / REC_HEIGHT;
        for (let i = 0; i < kx; i++) {
          const s = (u + (i + 0.5) / kx) / outW;
          // Bilinear blend of the four corners: exact for the parallelograms DB boxes become.
          const x = (1 - s) * (1 - t) * p0[0] + s * (1 - t) * p1[0] + s * t * p2[0] + (1 - s) * t * p3[0] - 0.5;
          const y = (1 - s) * (1 - t) * p0[1] + s * (1 - t) * p1[1] + s * t * p2[1] + (1 - s) * t * p3[1] - 0.5;
          addBilinear(img, x, y, acc);
        }
      }
      const at = offset + v * stride + u;
      out[at] = acc[0]! * norm - 1;
      out[at + plane] = acc[1]! * norm - 1;
      out[at + 2 * plane] = acc[2]! * norm - 1;
    }
  }
}

/** A batch [n, 3, 48, W] of crops, W = batchWidth of their scaled widths; zero-padded on the right. */
export function cropBatch(img: Image, quads: Quad[]): { data: Float32Array; width: number } {
  const widths = quads.map((q) => {
    const g = cropGeometry(q);
    return scaledWidth(g.w, g.h);
  });
  const width = batchWidth(widths);
  const per = 3 * REC_HEIGHT * width;
  const data = new Float32Array(quads.length * per);
  quads.forEach((q, i) => writeCrop(img, q, Math.min(widths[i]!, width), data, i * per, width));
  return { data, width };
}
