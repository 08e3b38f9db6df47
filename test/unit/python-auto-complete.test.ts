import { describe, expect, it } from 'vitest';
import { mergeAutoComplete } from '../../engine/backends/python/auto-complete.ts';
import type { ModelConfig } from '../../engine/api/model-config.ts';

const base = (): ModelConfig =>
  ({
    name: 'm',
    backend: 'python',
    max_batch_size: 0,
    input: [{ name: 'A', data_type: 'TYPE_INT32', dims: [2] }],
    output: [],
  }) as ModelConfig;

describe('python auto_complete_config merge', () => {
  it('adds what the config lacks and keeps what it states', () => {
    const c = base();
    const filled = mergeAutoComplete(c, {
      input: [
        { name: 'A', data_type: 'TYPE_FP32', dims: [9] },
        { name: 'B', data_type: 'TYPE_FP32', dims: ['3'] },
      ],
      output: [{ name: 'Y', data_type: 'TYPE_FP32', dims: [3] }],
      max_batch_size: 8,
      dynamic_batching: {},
      model_transaction_policy: { decoupled: true },
    });
    expect(filled).toEqual(['input.B', 'output.Y', 'max_batch_size', 'dynamic_batching', 'model_transaction_policy']);
    expect(c.input).toEqual([
      { name: 'A', data_type: 'TYPE_INT32', dims: [2] },
      { name: 'B', data_type: 'TYPE_FP32', dims: [3] },
    ]);
    expect(c.max_batch_size).toBe(8);
    expect(c.model_transaction_policy).toEqual({ decoupled: true });
  });

  it('never lowers a stated max_batch_size nor replaces a stated batcher', () => {
    const c = { ...base(), max_batch_size: 2, dynamic_batching: { max_queue_delay_microseconds: 5 } } as ModelConfig;
    expect(mergeAutoComplete(c, { max_batch_size: 16, dynamic_batching: {} })).toEqual([]);
    expect(c.max_batch_size).toBe(2);
    expect(c.dynamic_batching).toEqual({ max_queue_delay_microseconds: 5 });
  });
});
