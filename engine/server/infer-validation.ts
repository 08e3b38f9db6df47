// Checks of a request against its model's config before it is scheduled,
// with Triton's codes and messages naming the tensor.
import type { ModelConfig, ModelTensorConfig } from '../api/model-config.ts';
import type { InferInput, InferRequest } from '../api/infer-request.ts';
import { byteSizeOf, deserializeBytes, elementCount, fromConfigType } from '../api/datatypes.ts';
import { invalidArg } from '../api/status.ts';

/** The full shape a request tensor must have: batch dim -1 first when the model batches. */
export function fullShape(config: ModelConfig, t: ModelTensorConfig): number[] {
  return config.max_batch_size > 0 ? [-1, ...t.dims] : [...t.dims];
}

const fmt = (s: readonly number[]) => `[${s.join(',')}]`;

/** Validate inputs (names, datatypes, shapes, batch size) and requested outputs. */
export function validateRequest(config: ModelConfig, req: InferRequest): void {
  const model = config.name;
  const declared = new Map(config.input.map((i) => [i.name, i]));
  const seen = new Set<string>();
  let batch: number | undefined;
  for (const t of req.inputs) {
    const decl = declared.get(t.name);
    if (!decl) throw invalidArg(`unexpected inference input '${t.name}' for model '${model}'`);
    if (seen.has(t.name)) throw invalidArg(`input '${t.name}' given twice for model '${model}'`);
    seen.add(t.name);
    const want = fromConfigType(decl.data_type);
    if (t.datatype !== want) {
      throw invalidArg(`inference input '${t.name}' data-type is '${t.datatype}', but model '${model}' expects '${want}'`);
    }
    const expected = fullShape(config, decl);
    const ok =
      t.shape.length === expected.length &&
      t.shape.every((d, i) => Number.isInteger(d) && d >= 0 && (expected[i] === -1 || expected[i] === d));
    if (!ok) {
      throw invalidArg(`unexpected shape for input '${t.name}' for model '${model}'. Expected ${fmt(expected)}, got ${fmt(t.shape)}`);
    }
    if (config.max_batch_size > 0) {
      const b = t.shape[0]!;
      if (b < 1 || b > config.max_batch_size) {
        throw invalidArg(`inference request batch-size must be <= ${config.max_batch_size} for '${model}' (input '${t.name}' has batch ${b})`);
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
  const missing = config.input.filter((i) => !i.optional && !seen.has(i.name)).map((i) => i.name);
  if (missing.length) {
    throw invalidArg(
      `expected ${config.input.length} inputs but got ${req.inputs.length} inputs for model '${model}'. ` +
        `Got input(s) [${[...seen].map((s) => `'${s}'`).join(', ')}], but missing required input(s) [${missing.map((s) => `'${s}'`).join(', ')}]`,
    );
  }
  const outs = new Set(config.output.map((o) => o.name));
  for (const o of req.outputs) {
    if (!outs.has(o.name)) throw invalidArg(`unexpected inference output '${o.name}' for model '${model}'`);
  }
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
