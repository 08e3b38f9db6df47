// What the per-request checks read of a model's config, built once per
// config object instead of on every request: the inputs and outputs by name,
// each tensor's full shape (the batch dim -1 first when the model batches),
// the shapes an output may come back in, the required inputs, the ragged
// ones. The request checks (server/infer-validation.ts) and the response
// checks (output-check.ts) run on every inference; rebuilt per request these
// maps and arrays were about 4 KB of garbage per tiny call (issue 25).
// A config is not changed in place once loaded; should its input or output
// lists or max_batch_size be replaced anyway, the lookups are rebuilt.
import type { ModelConfig, ModelTensorConfig } from './model-config.ts';

export interface ConfigLookups {
  readonly inputs: ReadonlyMap<string, ModelTensorConfig>;
  /** Each input's full shape (-1: any size; the batch dim first when the model batches). */
  readonly inputShapes: ReadonlyMap<string, readonly number[]>;
  /** Inputs a request must give (not `optional`). */
  readonly required: readonly ModelTensorConfig[];
  readonly outputs: ReadonlyMap<string, ModelTensorConfig>;
  /** The shapes each output may come back in: its dims, and its reshape's (the batch dim first when the model batches). */
  readonly outputShapes: ReadonlyMap<string, ReadonlyArray<readonly number[]>>;
  /** Every output's name, in the config's order. */
  readonly outputNames: readonly string[];
  /** Inputs with allow_ragged_batch. */
  readonly ragged: ReadonlySet<string>;
}

interface Cached extends ConfigLookups {
  readonly from: { input: unknown; output: unknown; maxBatch: number };
}

const cache = new WeakMap<ModelConfig, Cached>();

/** The lookups of `config` (built on first use, then cached with the config). */
export function lookupsOf(config: ModelConfig): ConfigLookups {
  const c = cache.get(config);
  if (c && c.from.input === config.input && c.from.output === config.output && c.from.maxBatch === config.max_batch_size) return c;
  const built = build(config);
  cache.set(config, built);
  return built;
}

function build(config: ModelConfig): Cached {
  const batched = config.max_batch_size > 0;
  const full = (dims: readonly number[]) => (batched ? [-1, ...dims] : [...dims]);
  const inputs = config.input ?? [];
  const outputs = config.output ?? [];
  return {
    from: { input: config.input, output: config.output, maxBatch: config.max_batch_size },
    inputs: new Map(inputs.map((i) => [i.name, i])),
    inputShapes: new Map(inputs.map((i) => [i.name, full(i.dims)])),
    required: inputs.filter((i) => !i.optional),
    outputs: new Map(outputs.map((o) => [o.name, o])),
    outputShapes: new Map(outputs.map((o) => [o.name, [o.dims, ...(o.reshape ? [o.reshape.shape ?? []] : [])].map(full)])),
    outputNames: outputs.map((o) => o.name),
    ragged: new Set(inputs.filter((i) => i.allow_ragged_batch).map((i) => i.name)),
  };
}
