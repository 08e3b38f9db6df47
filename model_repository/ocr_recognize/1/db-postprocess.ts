// DB (Differentiable Binarization) post-processing as PaddleOCR's
// DBPostProcess does it, written from its documented steps: binarize the
// probability map at `thresh`, take each connected region, fit its
// minimum-area rectangle, score it by the mean probability inside, keep it
// when the score reaches `boxThresh`, grow it by the offset distance
// area * unclipRatio / perimeter, scale to source pixels, and sort the boxes
// top-to-bottom, left-to-right. Pure functions over plain arrays.

export type Point = [number, number];
/** Four corners, clockwise from top-left. */
export type Quad = [Point, Point, Point, Point];

export interface DbOptions {
  thresh: number;
  boxThresh: number;
  unclipRatio: number;
  /** Regions whose rectangle's short side is below this are noise. */
  minSize: number;
  maxCandidates: number;
}

export const DB_DEFAULTS: DbOptions = { thresh: 0.3, boxThresh: 0.6, unclipRatio: 1.5, minSize: 3, maxCandidates: 1000 };

/**
 * 8-connected regions of `prob > thresh`, each as the outline points that
 * matter for its convex hull: the first and last pixel (centre) of every row.
 */
export function regions(prob: Float32Array, w: number, h: number, thresh: number): Point[][] {
  const label = new Int32Array(w * h);
  const out: Point[][] = [];
  const stack: number[] = [];
  for (let start = 0; start < w * h; start++) {
    if (label[start] !== 0 || !(prob[start]! > thresh)) continue;
    const id = out.length + 1;
    const rowMin = new Map<number, number>();
    const rowMax = new Map<number, number>();
    label[start] = id;
    stack.push(start);
    while (stack.length) {
      const p = stack.pop()!;
      const x = p % w;
      const y = (p - x) / w;
      if (!(rowMin.get(y)! <= x)) rowMin.set(y, x);
      if (!(rowMax.get(y)! >= x)) rowMax.set(y, x);
      for (let dy = -1; dy <= 1; dy++) {
        const ny = y + dy;
        if (ny < 0 || ny >= h) continue;
        for (let dx = -1; dx <= 1; dx++) {
          const nx = x + dx;
          if (nx < 0 || nx >= w) continue;
          const q = ny * w + nx;
          if (label[q] === 0 && prob[q]! > thresh) {
            label[q] = id;
            stack.push(q);
          }
        }
      }
    }
    const pts: Point[] = [];
    for (const [y, x0] of rowMin) {
      pts.push([x0, y]);
      const x1 = rowMax.get(y)!;
      if (x1 !== x0) pts.push([x1, y]);
    }
    out.push(pts);
  }
  return out;
}

const cross = (o: Point, a: Point, b: Point) => (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]);

/** Convex hull (Andrew's monotone chain), counter-clockwise in y-down coordinates' mirror; no collinear points. */
export function convexHull(points: Point[]): Point[] {
  const pts = [...points].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  if (pts.length <= 2) return pts;
  const lower: Point[] = [];
  for (const p of pts) {
    while (lower.length >= 2 && cross(lower[lower.length - 2]!, lower[lower.length - 1]!, p) <= 0) lower.pop();
    lower.push(p);
  }
  const upper: Point[] = [];
  for (let i = pts.length - 1; i >= 0; i--) {
    const p = pts[i]!;
    while (upper.length >= 2 && cross(upper[upper.length - 2]!, upper[upper.length - 1]!, p) <= 0) upper.pop();
    upper.push(p);
  }
  return lower.slice(0, -1).concat(upper.slice(0, -1));
}

/** Minimum-area enclosing rectangle of a point set (rotating calipers over hull edges): corners, clockwise from top-left. */
export function minAreaRect(points: Point[]): { quad: Quad; width: number; height: number } {
  const hull = convexHull(points);
  if (hull.length === 1) {
    const p = hull[0]!;
    return { quad: [p, p, p, p], width: 0, height: 0 };
  }
  let best: { area: number; ux: number; uy: number; min0: number; max0: number; min1: number; max1: number } | undefined;
  for (let i = 0; i < hull.length; i++) {
    const a = hull[i]!;
    const b = hull[(i + 1) % hull.length]!;
    const len = Math.hypot(b[0] - a[0], b[1] - a[1]);
    if (len === 0) continue;
    const ux = (b[0] - a[0]) / len;
    const uy = (b[1] - a[1]) / len;
    let min0 = Infinity,
      max0 = -Infinity,
      min1 = Infinity,
      max1 = -Infinity;
    for (const p of hull) {
      const s = p[0] * ux + p[1] * uy;
      const t = -p[0] * uy + p[1] * ux;
      if (s < min0) min0 = s;
      if (s > max0) max0 = s;
      if (t < min1) min1 = t;
      if (t > max1) max1 = t;
    }
    const area = (max0 - min0) * (max1 - min1);
    if (!best || area < best.area - 1e-9) best = { area, ux, uy, min0, max0, min1, max1 };
  }
  const { ux, uy, min0, max0, min1, max1 } = best!;
  const at = (s: number, t: number): Point => [s * ux - t * uy, s * uy + t * ux];
  const corners = [at(min0, min1), at(max0, min1), at(max0, max1), at(min0, max1)];
  return { quad: orderClockwise(corners), width: max0 - min0, height: max1 - min1 };
}

/** Four corners ordered top-left, top-right, bottom-right, bottom-left (as PaddleOCR orders them). */
export function orderClockwise(pts: Point[]): Quad {
  const byX = [...pts].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const [l0, l1] = byX[0]![1] <= byX[1]![1] ? [byX[0]!, byX[1]!] : [byX[1]!, byX[0]!];
  const [r0, r1] = byX[2]![1] <= byX[3]![1] ? [byX[2]!, byX[3]!] : [byX[3]!, byX[2]!];
  return [l0, r0, r1, l1];
}

const inside = (q: Quad, x: number, y: number) => {
  let sign = 0;
  for (let i = 0; i < 4; i++) {
    const c = cross(q[i]!, q[(i + 1) % 4]!, [x, y]);
    if (c === 0) continue;
    const s = c > 0 ? 1 : -1;
    if (sign === 0) sign = s;
    else if (s !== sign) return false;
  }
  return true;
};

/** Mean probability of the pixels whose centres lie inside the quad (the box score). */
export function boxScore(prob: Float32Array, w: number, h: number, q: Quad): number {
  const xs = q.map((p) => p[0]);
  const ys = q.map((p) => p[1]);
  const x0 = Math.max(0, Math.floor(Math.min(...xs)));
  const x1 = Math.min(w - 1, Math.ceil(Math.max(...xs)));
  const y0 = Math.max(0, Math.floor(Math.min(...ys)));
  const y1 = Math.min(h - 1, Math.ceil(Math.max(...ys)));
  let sum = 0;
  let n = 0;
  for (let y = y0; y <= y1; y++) {
    for (let x = x0; x <= x1; x++) {
      if (!inside(q, x, y)) continue;
      sum += prob[y * w + x]!;
      n++;
    }
  }
  return n ? sum / n : 0;
}

/**
 * Grow a rectangle outward by area * ratio / perimeter on every side. For a
 * rectangle this is exactly the minimum-area rectangle of the polygon offset
 * (round joins) that PaddleOCR computes with a clipping library.
 */
export function unclip(r: { quad: Quad; width: number; height: number }, ratio: number): { quad: Quad; width: number; height: number } {
  const { quad, width, height } = r;
  const perimeter = 2 * (width + height);
  if (perimeter === 0) return r;
  const d = (width * height * ratio) / perimeter;
  const [p0, p1, , p3] = quad;
  const ulen = Math.hypot(p1[0] - p0[0], p1[1] - p0[1]) || 1;
  const vlen = Math.hypot(p3[0] - p0[0], p3[1] - p0[1]) || 1;
  const u: Point = width ? [(p1[0] - p0[0]) / ulen, (p1[1] - p0[1]) / ulen] : [1, 0];
  const v: Point = height ? [(p3[0] - p0[0]) / vlen, (p3[1] - p0[1]) / vlen] : [-u[1], u[0]];
  const move = (p: Point, su: number, sv: number): Point => [p[0] + d * (su * u[0] + sv * v[0]), p[1] + d * (su * u[1] + sv * v[1])];
  const grown: Point[] = [move(quad[0], -1, -1), move(quad[1], 1, -1), move(quad[2], 1, 1), move(quad[3], -1, 1)];
  return { quad: orderClockwise(grown), width: width + 2 * d, height: height + 2 * d };
}

/** Sort top-to-bottom, then left-to-right among boxes whose tops are within 10 px (PaddleOCR's reading order). */
export function sortBoxes<T extends { quad: Quad }>(boxes: T[]): T[] {
  const b = [...boxes].sort((x, y) => x.quad[0][1] - y.quad[0][1] || x.quad[0][0] - y.quad[0][0]);
  for (let i = 0; i < b.length - 1; i++) {
    for (let j = i; j >= 0; j--) {
      if (Math.abs(b[j + 1]!.quad[0][1] - b[j]!.quad[0][1]) < 10 && b[j + 1]!.quad[0][0] < b[j]!.quad[0][0]) {
        [b[j], b[j + 1]] = [b[j + 1]!, b[j]!];
      } else break;
    }
  }
  return b;
}

/**
 * Text boxes in source pixels from a probability map of w x h over a source
 * of srcW x srcH: each a quad (clockwise from top-left) and its score.
 */
export function detectBoxes(
  prob: Float32Array,
  w: number,
  h: number,
  srcW: number,
  srcH: number,
  o: DbOptions = DB_DEFAULTS,
): Array<{ quad: Quad; score: number }> {
  const sx = srcW / w;
  const sy = srcH / h;
  const found: Array<{ quad: Quad; score: number }> = [];
  for (const pts of regions(prob, w, h, o.thresh).slice(0, o.maxCandidates)) {
    const rect = minAreaRect(pts);
    if (Math.min(rect.width, rect.height) < o.minSize) continue;
    const score = boxScore(prob, w, h, rect.quad);
    if (score < o.boxThresh) continue;
    const big = unclip(rect, o.unclipRatio);
    if (Math.min(big.width, big.height) < o.minSize + 2) continue;
    const clip = (v: number, hi: number) => Math.min(Math.max(Math.round(v), 0), hi);
    const quad = orderClockwise(big.quad.map((p): Point => [clip(p[0] * sx, srcW), clip(p[1] * sy, srcH)]));
    const side = (a: Point, b: Point) => Math.hypot(a[0] - b[0], a[1] - b[1]);
    if (side(quad[0], quad[1]) <= 3 || side(quad[0], quad[3]) <= 3) continue;
    found.push({ quad, score });
  }
  return sortBoxes(found);
}
