// Triton's classification strings (server src/classification.cc): each
// entry is std::to_string(value) + ":" + index [+ ":" + label], the value
// written as printf's "%f" for floats. Checked against C's formatting
// (Python's "%f", which rounds the exact binary value half-to-even as glibc
// does) over thousands of values, ties included.
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { classify, classValueText } from '../../engine/server/classification.ts';
import { deserializeBytes } from '../../protocol/tensor-codec.ts';
import type { ModelConfig } from '../../engine/api/model-config.ts';

function printfF(values: number[]): string[] {
  const py = 'import sys,json\nfor v in json.load(sys.stdin): print("%f" % v)';
  return execFileSync('python3', ['-c', py], { input: JSON.stringify(values) })
    .toString()
    .trim()
    .split('\n');
}

/** Deterministic doubles across magnitudes, exact ties at the 7th decimal, and float32-rounded ones. */
function samples(): number[] {
  const out: number[] = [0, 0.5, 14, 1 / 128, 3 / 128, -1 / 128, 2.5e-7, 1e20, 123456.0000005, -1e-9];
  let s = 12345;
  const rnd = () => (s = (s * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  for (let i = 0; i < 3000; i++) {
    const mag = 10 ** Math.floor(rnd() * 16 - 8);
    const v = (rnd() - 0.5) * mag;
    out.push(v, Math.fround(v));
  }
  for (let k = 1; k < 400; k += 2) out.push(k / 128, -k / 2 ** 20, k * 2 ** -7 + 3); // ties (x * 1e6 ends in .5 exactly)
  return out;
}

const cfg = (mbs: number): ModelConfig =>
  ({ name: 'm', max_batch_size: mbs, input: [], output: [{ name: 'O', data_type: 'TYPE_FP32', dims: [-1] }] }) as unknown as ModelConfig;
const strings = (t: { data: Uint8Array }) => deserializeBytes(t.data).map((b) => Buffer.from(b).toString());

describe('classification values as Triton writes them', () => {
  it('floats match C\'s "%f" for every sample (differential)', () => {
    const values = samples();
    const ours = values.map((v) => classValueText(v, 'FP64'));
    expect(ours).toEqual(printfF(values));
  });

  it('integers in decimal, 64-bit exact; inf, nan and -0 as printf', () => {
    expect(classValueText(7, 'INT32')).toBe('7');
    expect(classValueText(2n ** 63n - 1n, 'INT64')).toBe('9223372036854775807');
    expect(classValueText(2n ** 64n - 1n, 'UINT64')).toBe('18446744073709551615');
    expect([Infinity, -Infinity, NaN, -0].map((v) => classValueText(v, 'FP32'))).toEqual(['inf', '-inf', 'nan', '-0.000000']);
  });

  it('top-k per batch row with labels; the batch is the first dim whenever the model batches', () => {
    const f = new Float32Array([0.25, 0.75, 0.5, 2, 1, 3]);
    const t = { name: 'O', datatype: 'FP32' as const, shape: [2, 3], data: new Uint8Array(f.buffer) };
    const r = classify(t, 2, cfg(8));
    expect(r.shape).toEqual([2, 2]);
    expect(strings(r)).toEqual(['0.750000:1', '0.500000:2', '3.000000:2', '2.000000:0']);
    // A batching model's [N] output: N rows of one class each (Triton's TRITONSERVER_BATCH_FIRST_DIM).
    const col = classify({ ...t, shape: [6] }, 3, cfg(8));
    expect(col.shape).toEqual([6, 1]);
    // Without batching the whole tensor is one row.
    expect(classify({ ...t, shape: [6] }, 1, cfg(0)).shape).toEqual([1]);
    const big = new BigInt64Array([5n, -(2n ** 62n), 2n ** 62n + 1n]);
    const i64 = classify({ name: 'O', datatype: 'INT64', shape: [3], data: new Uint8Array(big.buffer) }, 2, cfg(0));
    expect(strings(i64)).toEqual(['4611686018427387905:2', '5:0']);
  });

  it('refuses types Triton does not classify, with its text', () => {
    for (const dt of ['FP16', 'BF16', 'BOOL', 'BYTES'] as const) {
      expect(() => classify({ name: 'O', datatype: dt, shape: [2], data: new Uint8Array(4) }, 1, cfg(0))).toThrow(
        `class result not available for output due to unsupported type '${dt}'`,
      );
    }
  });
});
