// Checks of a request against its model's config before it is scheduled,
// with Triton's codes and messages naming the tensor.
import type { ModelConfig, ModelTensorConfig } from '../api/model-config.ts';
import type { InferInput, InferRequest } from '../api/infer-request.ts';
import { byteSizeOf, deserializeBytes, elementCount, fromConfigType } from '../api/datatypes.ts';
import { invalidArg } from '../api/status.ts';
import { lookupsOf } from '../api/config-lookups.ts';

/** The full shape a request tensor must have: batch dim -1 first when the model batches. */
export function fullShape(config: ModelConfig, t: ModelTensorConfig): number[] {
  return config.max_batch_size > 0 ? [-1, ...t.dims] : [...t.dims];
}

const fmt = (s: readonly number[]) => `[${s.join(',')}]`;

/** Validate inputs (names, datatypes, shapes, batch size) and requested outputs. */
export function validateRequest(config: ModelConfig, req: InferRequest): void {
  const model = config.name;
  const look = lookupsOf(config);
  const inputs = req.inputs;
  let batch: number | undefined;
  for (let k = 0; k < inputs.length; k++) {
    const t = inputs[k]!;
    const decl = look.inputs.get(t.name);
    if (!decl) throw invalidArg(`unexpected inference input '${t.name}' for model '${model}'`);
    if (givenBefore(inputs, k)) throw invalidArg(`input '${t.name}' given twice for model '${model}'`);
    const want = fromConfigType(decl.data_type);
    if (t.datatype !== want) {
      throw invalidArg(`inference input '${t.name}' data-type is '${t.datatype}', but model '${model}' expects '${want}'`);
    }
    const expected = look.inputShapes.get(t.name)!;
    if (!shapeFits(t.shape, expected)) {
      throw invalidArg(`unexpected shape for input '${t.name}' for model '${model}'. Expected ${fmt(expected)}, got ${fmt(t.shape)}`);
    }
    if (config.max_batch_size > 0) {
      const b = t.shape[0]!;
      if (b < 1 || b > config.max_batch_size) {
        throw invalidArg(
          `inference request batch-size must be <= ${config.max_batch_size} for '${model}' (input '${t.name}' has batch ${b})`,
        );
      }
      if (batch !== undefined && b !== batch) {
        throw invalidArg(`input '${t.name}' batch size ${b} does not match the other inputs' ${batch} for model '${model}'`);
      }
      batch = b;
    }
    if (!t.shm) checkByteSize(t, model);
    else if (t.datatype !== 'BYTES' && t.shm.byteSize !== byteSizeOf(t.datatype, t.shape)) {
      throw invalidArg(
        `input byte size mismatch for input '${t.name}' for model '${model}'. Expected ${byteSizeOf(t.datatype, t.shape)}, got ${t.shm.byteSize}`,
      );
    }
  }
  if (missingRequired(inputs, look.required)) {
    const seen = inputs.map((t) => t.name);
    const missing = look.required.filter((i) => !seen.includes(i.name)).map((i) => i.name);
    throw invalidArg(
      `expected ${config.input.length} inputs but got ${inputs.length} inputs for model '${model}'. ` +
        `Got input(s) [${seen.map((s) => `'${s}'`).join(', ')}], but missing required input(s) [${missing.map((s) => `'${s}'`).join(', ')}]`,
    );
  }
  for (const o of req.outputs) {
    if (!look.outputs.has(o.name)) throw invalidArg(`unexpected inference output '${o.name}' for model '${model}'`);
  }
}

/** Whether a required input is not among `inputs`. */
function missingRequired(inputs: readonly InferInput[], required: readonly ModelTensorConfig[]): boolean {
  for (const r of required) {
    let found = false;
    for (let j = 0; j < inputs.length && !found; j++) found = inputs[j]!.name === r.name;
    if (!found) return true;
  }
  return false;
}

/** Whether an input before the k-th has the k-th's name. */
function givenBefore(inputs: readonly InferInput[], k: number): boolean {
  const name = inputs[k]!.name;
  for (let j = 0; j < k; j++) if (inputs[j]!.name === name) return true;
  return false;
}

/** `shape` has `expected`'s rank, every dim a non-negative integer equal to the expected one where that is not -1. */
function shapeFits(shape: readonly number[], expected: readonly number[]): boolean {
  if (shape.length !== expected.length) return false;
  for (let i = 0; i < shape.length; i++) {
    const d = shape[i]!;
    if (!Number.isInteger(d) || d < 0 || (expected[i] !== -1 && expected[i] !== d)) return false;
  }
  return true;
}

/** Bytes given must match the shape (BYTES: element count must match). */
export function checkByteSize(t: InferInput, model: string): void {
  if (t.datatype === 'BYTES') {
    const n = deserializeBytes(t.data, t.name).length;
    if (n !== elementCount(t.shape)) {
      throw invalidArg(`expected ${elementCount(t.shape)} string elements for inference input '${t.name}' for model '${model}', got ${n}`);
    }
    return;
  }
  const want = byteSizeOf(t.datatype, t.shape);
  if (t.data.byteLength !== want) {
    throw invalidArg(`input byte size mismatch for input '${t.name}' for model '${model}'. Expected ${want}, got ${t.data.byteLength}`);
  }
}
