// The tensor and platform facts of a model config that both normalisation
// (model-config-utils.ts) and validation (model-config-validation.ts) read:
// kept apart so neither of those two imports the other back.
import { fromConfigType, type Datatype } from '../api/datatypes.ts';
import type { ModelConfig, ModelTensorConfig } from '../api/model-config.ts';

/** One input/output as the model file declares it; -1 marks a dynamic dim. */
export interface IOInfo {
  name: string;
  datatype: Datatype;
  shape: number[];
}

export const ENSEMBLE_PLATFORM = 'ensemble';

/** True for `platform: "ensemble"`. */
export function isEnsemble(config: ModelConfig): boolean {
  return config.platform === ENSEMBLE_PLATFORM;
}

/** The full tensor shape a request carries: dims with a -1 batch dim first when the model batches. */
export function modelTensorShape(config: ModelConfig, tensor: ModelTensorConfig): number[] {
  return config.max_batch_size > 0 ? [-1, ...tensor.dims] : [...tensor.dims];
}

/** The wire datatype (FP32) of a config tensor (TYPE_FP32). */
export function tensorDatatype(tensor: ModelTensorConfig): Datatype {
  return fromConfigType(tensor.data_type);
}

export function findInput(config: ModelConfig, name: string): ModelTensorConfig | undefined {
  return config.input.find((t) => t.name === name);
}
export function findOutput(config: ModelConfig, name: string): ModelTensorConfig | undefined {
  return config.output.find((t) => t.name === name);
}

/** True when `actual` fits `pattern`, -1 in either matching any size. */
export function dimsCompatible(pattern: readonly number[], actual: readonly number[]): boolean {
  return pattern.length === actual.length && pattern.every((d, i) => d === -1 || actual[i] === -1 || d === actual[i]);
}
