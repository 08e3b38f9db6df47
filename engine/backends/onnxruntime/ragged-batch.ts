// Triton's ragged batching for the onnxruntime backend: an input with
// `allow_ragged_batch` is fed as one 1-D tensor, the requests' elements
// concatenated; `batch_input` tensors tell the model where each request's
// elements are (Triton's backend input collector). Pure; one call per batch.
import type { InferRequest, Tensor } from '../../api/infer-request.ts';
import type { ModelConfig } from '../../api/model-config.ts';
import { invalidArg } from '../../api/status.ts';

const count = (shape: readonly number[]) => shape.reduce((n, d) => n * d, 1);

/** Names of the inputs fed flattened (ragged) to the model. */
export function raggedInputs(config: ModelConfig): Set<string> {
  if (config.max_batch_size <= 0) return new Set();
  return new Set(config.input.filter((t) => t.allow_ragged_batch).map((t) => t.name));
}

/** The batch input tensors of `requests`, in config order (FP32 or INT32, as the config says). */
export function batchInputTensors(config: ModelConfig, requests: InferRequest[]): Tensor[] {
  return (config.batch_input ?? []).map((b) => {
    const name = b.target_name![0]!;
    const source = b.source_input![0]!;
    const shapes = requests.map((r) => {
      const t = r.inputs.find((x) => x.name === source);
      if (!t) throw invalidArg(`batch input '${name}' needs input '${source}', missing from a request for model '${config.name}'`);
      return t.shape;
    });
    const counts = shapes.map(count);
    let values: number[];
    let shape: number[];
    switch (b.kind ?? 'BATCH_ELEMENT_COUNT') {
      case 'BATCH_ELEMENT_COUNT':
        values = counts;
        shape = [counts.length];
        break;
      case 'BATCH_ACCUMULATED_ELEMENT_COUNT':
      case 'BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO': {
        let sum = 0;
        values = counts.map((n) => (sum += n));
        if (b.kind === 'BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO') values.unshift(0);
        shape = [values.length];
        break;
      }
      case 'BATCH_MAX_ELEMENT_COUNT_AS_SHAPE':
        // Only the shape says something; the values are zeros.
        shape = [Math.max(0, ...counts)];
        values = new Array<number>(shape[0]!).fill(0);
        break;
      default: {
        // BATCH_ITEM_SHAPE(_FLATTEN): each batch item's shape (the request's shape less its batch dim), one row per item.
        const rows = shapes.flatMap((s) => new Array<number[]>(s[0] ?? 1).fill(s.slice(1)));
        const rank = rows[0]?.length ?? 0;
        if (rows.some((r) => r.length !== rank)) throw invalidArg(`batch input '${name}': the items of '${source}' differ in rank`);
        values = rows.flat();
        shape = b.kind === 'BATCH_ITEM_SHAPE' ? [rows.length, rank] : [values.length];
      }
    }
    const data = b.data_type === 'TYPE_FP32' ? new Float32Array(values) : new Int32Array(values);
    return { name, datatype: b.data_type === 'TYPE_FP32' ? 'FP32' : 'INT32', shape, data: new Uint8Array(data.buffer) };
  });
}

/** The dims the model sees for input `name` of a batch: 1-D when ragged, else the batch concatenated on dim 0. */
export function batchDims(name: string, requests: InferRequest[], ragged: ReadonlySet<string>, batched: boolean): number[] {
  const shapes = requests.map((r) => r.inputs.find((x) => x.name === name)!.shape);
  if (ragged.has(name)) return [shapes.reduce((n, s) => n + count(s), 0)];
  return batched ? [shapes.reduce((n, s) => n + s[0]!, 0), ...shapes[0]!.slice(1)] : shapes[0]!;
}
