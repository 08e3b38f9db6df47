// Triton's ragged batching for the onnxruntime backend: an input with
// `allow_ragged_batch` is fed as one 1-D tensor, the requests' elements
// concatenated; `batch_input` tensors tell the model where each request's
// elements are (Triton's backend input collector); a `batch_output` is split
// back to the requests by the shape of an input (its output responder).
// Pure; one call per batch.
import type { InferRequest, Tensor } from '../../api/infer-request.ts';
import type { ModelConfig } from '../../api/model-config.ts';
import { invalidArg } from '../../api/status.ts';
import { deserializeBytes, serializeBytes } from '../../api/datatypes.ts';

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

/** Output name -> source input of each `batch_output` target (Triton's BATCH_SCATTER_WITH_INPUT_SHAPE). */
export function batchOutputSources(config: ModelConfig): Map<string, string> {
  const m = new Map<string, string>();
  for (const b of config.batch_output ?? []) for (const t of b.target_name ?? []) m.set(t, b.source_input![0]!);
  return m;
}

/**
 * Scatter batch output `t` to `requests` as Triton's backend output
 * responder does: request i gets the output's config shape (batch dim
 * first when the model batches) with every -1 taken from its source input's
 * shape at the same position, and that many elements of `t`, in order.
 */
export function scatterBatchOutput(config: ModelConfig, t: Tensor, source: string, requests: InferRequest[]): Tensor[] {
  const cfg = config.output.find((o) => o.name === t.name)!;
  const dims = [...(config.max_batch_size > 0 ? [-1] : []), ...(cfg.reshape?.shape ?? cfg.dims)];
  const items = t.datatype === 'BYTES' ? deserializeBytes(t.data, t.name) : undefined;
  const total = items ? items.length : count(t.shape);
  const elemBytes = items || total === 0 ? 0 : t.data.byteLength / total;
  let at = 0;
  return requests.map((r) => {
    const src = r.inputs.find((x) => x.name === source)!.shape;
    const shape = dims.map((d, i) => (d === -1 ? (src[i] ?? 1) : d));
    const n = count(shape);
    if (at + n > total) {
      throw invalidArg(
        `batch output '${t.name}' of model '${config.name}' has ${total} elements, too few to scatter by the shapes of input '${source}'`,
      );
    }
    const data = items ? serializeBytes(items.slice(at, at + n)) : t.data.subarray(at * elemBytes, (at + n) * elemBytes);
    at += n;
    return { name: t.name, datatype: t.datatype, shape, data };
  });
}
