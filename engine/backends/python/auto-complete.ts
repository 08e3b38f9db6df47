// Applies what a model's `auto_complete_config(auto_complete_model_config)`
// returned to the normalized config: inputs and outputs the config lacks,
// max_batch_size when the config left it 0, dynamic_batching and the
// transaction policy when the config has none. What the config states wins,
// as in Triton. Pure.
import type { ModelConfig, ModelTensorConfig } from '../../api/model-config.ts';

/** Merge `completed` (the dict the stub sent back) into `config` in place; returns the field names it filled. */
export function mergeAutoComplete(config: ModelConfig, completed: Record<string, unknown>): string[] {
  const filled: string[] = [];
  for (const key of ['input', 'output'] as const) {
    const list = Array.isArray(completed[key]) ? (completed[key] as Array<Partial<ModelTensorConfig>>) : [];
    for (const t of list) {
      if (!t?.name || config[key].some((x) => x.name === t.name)) continue;
      config[key].push({ ...t, name: t.name, data_type: t.data_type ?? 'TYPE_FP32', dims: (t.dims ?? []).map(Number) });
      filled.push(`${key}.${t.name}`);
    }
  }
  const mbs = Number(completed.max_batch_size ?? 0);
  if (!config.max_batch_size && Number.isInteger(mbs) && mbs > 0) {
    config.max_batch_size = mbs;
    filled.push('max_batch_size');
  }
  const given = (key: 'dynamic_batching' | 'model_transaction_policy'): boolean =>
    !!completed[key] && typeof completed[key] === 'object' && config[key] === undefined;
  if (given('dynamic_batching')) {
    config.dynamic_batching = structuredClone(completed.dynamic_batching) as ModelConfig['dynamic_batching'];
    filled.push('dynamic_batching');
  }
  if (given('model_transaction_policy')) {
    config.model_transaction_policy = structuredClone(completed.model_transaction_policy) as ModelConfig['model_transaction_policy'];
    filled.push('model_transaction_policy');
  }
  return filled;
}
