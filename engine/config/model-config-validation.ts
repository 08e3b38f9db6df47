// Validation half of model_config_utils: checks a normalized config (and,
// for onnxruntime, that it agrees with the model file), once at load. Errors
// are INVALID_ARG naming the config file and the field path. Pure; no I/O.
import { invalidArg } from '../api/status.ts';
import { toConfigType } from '../api/datatypes.ts';
import type { ModelConfig, ModelTensorConfig } from '../api/model-config.ts';
import { ENSEMBLE_PLATFORM, dimsCompatible, findInput, isEnsemble, type IOInfo } from './model-config-tensors.ts';

/** Builds the INVALID_ARG for a field path. */
export type Fail = (path: string, what: string) => Error;

/** Check a normalized config; throws INVALID_ARG naming file and field path. */
export function validateModelConfig(c: ModelConfig, file: string): void {
  const fail: Fail = (path, what) => invalidArg(`${file}: ${path ? `${path}: ` : ''}${what}`);
  if (!Number.isInteger(c.max_batch_size) || c.max_batch_size < 0) {
    throw fail('max_batch_size', `must be 0 or more, got ${c.max_batch_size}`);
  }
  validateTensors(c.input, 'input', fail);
  validateTensors(c.output, 'output', fail);

  const d = c.dynamic_batching;
  if (d) {
    if (c.max_batch_size === 0) throw fail('dynamic_batching', 'requires max_batch_size > 0');
    d.preferred_batch_size?.forEach((s, i) => {
      if (s < 1 || s > c.max_batch_size) {
        throw fail(`dynamic_batching.preferred_batch_size[${i}]`, `${s} is not within 1..max_batch_size (${c.max_batch_size})`);
      }
    });
    const levels = d.priority_levels ?? 0;
    if (levels > 0) {
      const def = d.default_priority_level ?? 0;
      if (def < 1 || def > levels) {
        throw fail('dynamic_batching.default_priority_level', `${def} is not within 1..priority_levels (${levels})`);
      }
    }
    for (const k of Object.keys(d.priority_queue_policy ?? {})) {
      if (Number(k) < 1 || Number(k) > levels) {
        throw fail(`dynamic_batching.priority_queue_policy[${k}]`, `priority level ${k} is not within 1..priority_levels (${levels})`);
      }
    }
  }

  if (isEnsemble(c)) {
    const steps = c.ensemble_scheduling?.step ?? [];
    if (steps.length === 0) throw fail('ensemble_scheduling', "an ensemble needs 'ensemble_scheduling' with at least one step");
    if ((c.instance_group ?? []).length) throw fail('instance_group', 'must not be set for an ensemble');
    if ((c.model_warmup ?? []).length) throw fail('model_warmup', 'must not be set for an ensemble');
    steps.forEach((s, i) => {
      if (!s.model_name) throw fail(`ensemble_scheduling.step[${i}].model_name`, 'must name the model to run');
    });
  } else if (c.ensemble_scheduling) {
    throw fail('ensemble_scheduling', `only valid with platform '${ENSEMBLE_PLATFORM}'`);
  }

  validateBatchInputs(c, fail);
  validateBatchOutputs(c, fail);

  (c.model_warmup ?? []).forEach((w, i) => {
    const path = `model_warmup[${i}]`;
    const limit = Math.max(1, c.max_batch_size);
    if (w.batch_size < 1 || w.batch_size > limit) throw fail(`${path}.batch_size`, `${w.batch_size} is not within 1..${limit}`);
    for (const k of Object.keys(w.inputs ?? {})) {
      if (!findInput(c, k)) throw fail(`${path}.inputs[${k}]`, `'${k}' is not an input of the model`);
    }
  });
}

export const BATCH_INPUT_KINDS = [
  'BATCH_ELEMENT_COUNT',
  'BATCH_ACCUMULATED_ELEMENT_COUNT',
  'BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO',
  'BATCH_MAX_ELEMENT_COUNT_AS_SHAPE',
  'BATCH_ITEM_SHAPE',
  'BATCH_ITEM_SHAPE_FLATTEN',
];

/** batch_input: a known kind, one target that is not a request input, one source that is, FP32 or INT32. */
function validateBatchInputs(c: ModelConfig, fail: Fail): void {
  (c.batch_input ?? []).forEach((b, i) => {
    const path = `batch_input[${i}]`;
    const kind = b.kind ?? 'BATCH_ELEMENT_COUNT';
    if (!BATCH_INPUT_KINDS.includes(kind)) throw fail(`${path}.kind`, `unknown kind '${kind}'`);
    const targets = b.target_name ?? [];
    if (targets.length !== 1) throw fail(`${path}.target_name`, `needs exactly one target name, got ${targets.length}`);
    if (findInput(c, targets[0]!))
      throw fail(`${path}.target_name`, `'${targets[0]}' is also a request input; a batch input is built by the server`);
    if (b.data_type !== 'TYPE_FP32' && b.data_type !== 'TYPE_INT32') {
      throw fail(`${path}.data_type`, `batch input '${targets[0]}' must be TYPE_FP32 or TYPE_INT32, got ${b.data_type ?? 'none'}`);
    }
    const sources = b.source_input ?? [];
    if (sources.length !== 1) throw fail(`${path}.source_input`, `needs exactly one source input, got ${sources.length}`);
    if (!findInput(c, sources[0]!)) throw fail(`${path}.source_input`, `'${sources[0]}' is not an input of the model`);
  });
}

/** batch_output: Triton's one kind, targets that are outputs, one source that is an input. */
function validateBatchOutputs(c: ModelConfig, fail: Fail): void {
  (c.batch_output ?? []).forEach((b, i) => {
    const path = `batch_output[${i}]`;
    const kind = b.kind ?? 'BATCH_SCATTER_WITH_INPUT_SHAPE';
    if (kind !== 'BATCH_SCATTER_WITH_INPUT_SHAPE')
      throw fail(`${path}.kind`, `unexpected batch output kind '${kind}' (only BATCH_SCATTER_WITH_INPUT_SHAPE)`);
    const targets = b.target_name ?? [];
    if (targets.length === 0) throw fail(`${path}.target_name`, 'needs at least one target name');
    for (const t of targets)
      if (!c.output.some((o) => o.name === t)) throw fail(`${path}.target_name`, `'${t}' is not an output of the model`);
    const sources = b.source_input ?? [];
    if (sources.length !== 1) throw fail(`${path}.source_input`, `needs exactly one source input, got ${sources.length}`);
    if (!findInput(c, sources[0]!)) throw fail(`${path}.source_input`, `'${sources[0]}' is not an input of the model`);
  });
}

function validateTensors(list: ModelTensorConfig[], kind: 'input' | 'output', fail: Fail): void {
  const seen = new Set<string>();
  list.forEach((t, i) => {
    const path = `${kind}[${i}]`;
    if (!t.name) throw fail(`${path}.name`, `every ${kind} needs a name`);
    if (seen.has(t.name)) throw fail(`${path}.name`, `duplicate ${kind} name '${t.name}'`);
    seen.add(t.name);
    if (!t.data_type || t.data_type === 'TYPE_INVALID') throw fail(`${path}.data_type`, `'${t.name}' needs a data_type`);
    if (t.dims.length === 0 && !t.reshape)
      throw fail(`${path}.dims`, `'${t.name}' needs dims (use dims: [1] with reshape: { shape: [] } for a scalar)`);
    t.dims.forEach((d, j) => {
      if (!Number.isInteger(d) || d < -1 || d === 0) throw fail(`${path}.dims[${j}]`, `must be -1 or at least 1, got ${d}`);
    });
    if (t.reshape) {
      const shape = t.reshape.shape ?? [];
      shape.forEach((d, j) => {
        if (d < -1 || d === 0) throw fail(`${path}.reshape.shape[${j}]`, `must be -1 or at least 1, got ${d}`);
      });
      const count = (s: number[]) => s.reduce((n, d) => n * d, 1);
      if (!t.dims.includes(-1) && !shape.includes(-1) && count(t.dims) !== count(shape)) {
        throw fail(`${path}.reshape`, `[${shape}] has ${count(shape)} elements but dims [${t.dims}] has ${count(t.dims)}`);
      }
    }
    const format = (t as { format?: string }).format;
    if (format && format !== 'FORMAT_NONE' && t.dims.length !== 3) {
      throw fail(`${path}.format`, `${format} needs 3 dims (without the batch dim), got [${t.dims}]`);
    }
  });
}

/** Compare the config's inputs/outputs with what the ONNX model declares. */
export function validateAgainstModel(c: ModelConfig, io: { inputs: IOInfo[]; outputs: IOInfo[] }, fail: Fail): void {
  const check = (list: ModelTensorConfig[], infos: IOInfo[], kind: 'input' | 'output') => {
    list.forEach((t, i) => {
      const path = `${kind}[${i}]`;
      const info = infos.find((x) => x.name === t.name);
      if (!info) {
        const names = infos.map((x) => x.name).join(', ');
        throw fail(`${path}.name`, `'${t.name}' is not an ${kind} of the model file (it has: ${names})`);
      }
      const dt = toConfigType(info.datatype);
      if (t.data_type !== dt) throw fail(`${path}.data_type`, `'${t.name}' is ${dt} in the model file, config says ${t.data_type}`);
      // A batch output's shape in the model file is the whole batch's; its requests' shapes come from their source input.
      if (kind === 'output' && c.batch_output?.some((b) => b.target_name?.includes(t.name))) return;
      let shape = info.shape;
      if (kind === 'input' && t.allow_ragged_batch && c.max_batch_size > 0) {
        // Ragged batching: the backend concatenates the batch into one 1-D tensor (Triton's onnxruntime backend).
        if (shape.length !== 1)
          throw fail(
            `${path}.allow_ragged_batch`,
            `'${t.name}' must be 1-D in the model file to take ragged batches, it has shape [${shape}]`,
          );
        return;
      }
      if (c.max_batch_size > 0) {
        if (shape[0] !== -1) {
          throw fail(
            'max_batch_size',
            `${c.max_batch_size} but ${kind} '${t.name}' has no dynamic batch dim in the model file (shape [${shape}])`,
          );
        }
        shape = shape.slice(1);
      }
      const dims = t.reshape ? (t.reshape.shape ?? []) : t.dims;
      if (!dimsCompatible(shape, dims)) {
        throw fail(
          `${path}.${t.reshape ? 'reshape.shape' : 'dims'}`,
          `[${dims}] does not match [${shape}] of '${t.name}' in the model file`,
        );
      }
    });
  };
  check(c.input, io.inputs, 'input');
  check(c.output, io.outputs, 'output');
  for (const info of io.inputs) {
    if (!findInput(c, info.name)) throw fail('input', `the model file's input '${info.name}' is missing from the config`);
  }
}
