// Triton's `reshape` on model inputs and outputs: a client sends an input in
// its config `dims` shape and the backend receives it in `reshape.shape`; a
// backend answers an output in `reshape.shape` and the client receives it in
// `dims`. The batch dimension (max_batch_size > 0) is kept as it is. A -1 in
// the target shape takes the source's variable-size values in order (as
// Triton's request normalisation and response AddOutput do); one left over is
// worked out from the element count. Pure; the data bytes never move.
import type { ModelConfig, ModelTensorConfig } from '../api/model-config.ts';
import type { Tensor } from '../api/infer-request.ts';

/** Shape `shape` (without batch dim) laid out in `from` dims, re-expressed in `to` dims. */
function convert(shape: readonly number[], from: readonly number[], to: readonly number[]): number[] {
  const variable = from.flatMap((d, i) => (d === -1 ? [shape[i] ?? 1] : []));
  const out = to.map((d) => (d === -1 ? (variable.length ? variable.shift()! : -1) : d));
  const unknown = out.indexOf(-1);
  if (unknown >= 0) {
    const total = shape.reduce((n, d) => n * d, 1);
    const known = out.reduce((n, d) => (d === -1 ? n : n * d), 1);
    out[unknown] = known ? total / known : 0;
  }
  return out;
}

function reshaped<T extends Tensor>(config: ModelConfig, t: T, decl: ModelTensorConfig | undefined, toBackend: boolean): T {
  const target = decl?.reshape?.shape;
  if (!decl || !target) return t;
  const batched = config.max_batch_size > 0;
  const inner = batched ? t.shape.slice(1) : t.shape;
  // An output a backend already gave in its config dims (not the reshape shape) stays as it is.
  const from = toBackend ? decl.dims : target;
  if (inner.length !== from.length || inner.some((d, i) => from[i] !== -1 && from[i] !== d)) return t;
  const shape = toBackend ? convert(inner, decl.dims, target) : convert(inner, target, decl.dims);
  return { ...t, shape: batched ? [t.shape[0]!, ...shape] : shape };
}

/** True when some input or output of the model declares a reshape. */
export function hasReshape(config: ModelConfig): boolean {
  return config.input.some((t) => t.reshape) || config.output.some((t) => t.reshape);
}

/** Inputs as the backend sees them: each in its `reshape.shape` (plus the batch dim). */
export function reshapeInputs<T extends Tensor>(config: ModelConfig, inputs: T[]): T[] {
  if (!config.input.some((t) => t.reshape)) return inputs;
  return inputs.map((t) =>
    reshaped(
      config,
      t,
      config.input.find((d) => d.name === t.name),
      true,
    ),
  );
}

/** Outputs as the client sees them: each back in its config `dims` (plus the batch dim). */
export function reshapeOutputs<T extends Tensor>(config: ModelConfig, outputs: T[]): T[] {
  if (!config.output.some((t) => t.reshape)) return outputs;
  return outputs.map((t) =>
    reshaped(
      config,
      t,
      config.output.find((d) => d.name === t.name),
      false,
    ),
  );
}

/** The shape an ensemble tensor has inside the ensemble: the reshape target when the ensemble declares one. */
export function innerDims(t: ModelTensorConfig): number[] {
  return t.reshape ? [...(t.reshape.shape ?? [])] : [...t.dims];
}
