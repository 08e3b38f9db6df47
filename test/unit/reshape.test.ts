import { describe, expect, it } from 'vitest';
import { reshapeInputs, reshapeOutputs, innerDims } from '../../engine/config/reshape.ts';
import type { ModelConfig } from '../../engine/api/model-config.ts';
import type { Tensor } from '../../engine/api/infer-request.ts';

const cfg = (mbs: number, dims: number[], shape: number[]): ModelConfig =>
  ({
    name: 'm',
    max_batch_size: mbs,
    input: [{ name: 'I', data_type: 'TYPE_FP32', dims, reshape: { shape } }],
    output: [{ name: 'O', data_type: 'TYPE_FP32', dims, reshape: { shape } }],
  }) as ModelConfig;
const t = (name: string, shape: number[]): Tensor => ({ name, datatype: 'FP32', shape, data: new Uint8Array(0) });

describe('reshape', () => {
  it('keeps the batch dim and maps dims [1] to a scalar and back', () => {
    const c = cfg(8, [1], []);
    expect(reshapeInputs(c, [t('I', [5, 1])])[0]!.shape).toEqual([5]);
    expect(reshapeOutputs(c, [t('O', [5])])[0]!.shape).toEqual([5, 1]);
  });
  it('fills -1 of the target from the variable dims of the source, in order', () => {
    const c = cfg(0, [-1, 4, -1], [-1, 2, 2, -1]);
    expect(reshapeInputs(c, [t('I', [3, 4, 7])])[0]!.shape).toEqual([3, 2, 2, 7]);
    expect(reshapeOutputs(c, [t('O', [3, 2, 2, 7])])[0]!.shape).toEqual([3, 4, 7]);
  });
  it('leaves an output that is already in its config dims', () => {
    const c = cfg(4, [2, 3], [6]);
    expect(reshapeOutputs(c, [t('O', [2, 2, 3])])[0]!.shape).toEqual([2, 2, 3]);
  });
  it('works a lone -1 out from the element count', () => {
    const c = cfg(4, [2, 3], [-1]);
    expect(reshapeInputs(c, [t('I', [2, 2, 3])])[0]!.shape).toEqual([2, 6]);
    expect(reshapeOutputs(c, [t('O', [2, 6])])[0]!.shape).toEqual([2, 2, 3]);
  });
  it('leaves tensors without a reshape alone, and names the ensemble-inner shape', () => {
    const c = cfg(4, [2, 3], [6]);
    const other = t('X', [1, 9]);
    expect(reshapeInputs(c, [other])[0]).toBe(other);
    expect(innerDims(c.input[0]!)).toEqual([6]);
    expect(innerDims({ name: 'a', data_type: 'TYPE_FP32', dims: [3] })).toEqual([3]);
  });
});
