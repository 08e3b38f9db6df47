// Triton's classification extension: an output requested with
// `classification: k` comes back as BYTES holding the top-k entries of each
// batch row as "value:index" (or "value:index:label" when the output's
// config names a label_filename). An ensemble output without a
// label_filename of its own takes the labels of the composing model's output
// that writes it (through nested ensembles), as Triton does.
import fs from 'node:fs';
import path from 'node:path';
import type { Tensor } from '../api/infer-request.ts';
import type { ModelConfig } from '../api/model-config.ts';
import { serializeBytes, typedView, type Datatype } from '../api/datatypes.ts';
import { invalidArg } from '../api/status.ts';

const labelCache = new Map<string, string[]>();

/** A model's config and folder, by name and step version (-1 = latest ready); undefined when not loaded. */
export type ModelLookup = (name: string, version: number) => { config: ModelConfig; dir: string } | undefined;

/** The labels of `output`: its own label_filename, else (ensembles) those of the step output that writes it. */
export function labelsOf(
  config: ModelConfig,
  output: string,
  modelDir: string | undefined,
  lookup?: ModelLookup,
  depth = 0,
): string[] | undefined {
  const file = config.output.find((o) => o.name === output)?.label_filename;
  if (!file && lookup && depth < 16) {
    for (const step of config.ensemble_scheduling?.step ?? []) {
      const from = Object.entries(step.output_map ?? {}).find(([, tensor]) => tensor === output)?.[0];
      if (from === undefined) continue;
      const m = lookup(step.model_name, step.model_version ?? -1);
      return m ? labelsOf(m.config, from, m.dir, lookup, depth + 1) : undefined;
    }
  }
  if (!file || !modelDir) return undefined;
  const p = path.join(modelDir, file);
  let labels = labelCache.get(p);
  if (!labels) {
    labels = fs.existsSync(p) ? fs.readFileSync(p, 'utf8').split(/\r?\n/) : [];
    labelCache.set(p, labels);
  }
  return labels;
}

/** Datatypes Triton classifies (its TopkClassifications switch); others are refused with its text. */
const CLASSIFIABLE = new Set(['UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64', 'FP32', 'FP64']);

/**
 * A value as Triton writes it into a class string: std::to_string, i.e.
 * integers in decimal and floats as printf's "%f" (six decimals, exact ties
 * to even, "inf"/"nan"), so 0.5 is "0.500000" as Triton's clients see it.
 */
export function classValueText(v: number | bigint, datatype: string): string {
  if (typeof v === 'bigint' || (datatype !== 'FP32' && datatype !== 'FP64')) return String(v);
  if (Number.isNaN(v)) return 'nan'; // JS numbers do not keep a NaN's sign reliably; printf would write '-nan' for one
  if (!Number.isFinite(v)) return v > 0 ? 'inf' : '-inf';
  if (Object.is(v, -0)) return '-0.000000';
  if (Math.abs(v) >= 1e21) return `${BigInt(v)}.000000`; // toFixed turns to exponent form there; such doubles are integers
  const up = v.toFixed(6); // the nearer, or on an exact tie the larger in magnitude
  const exact = v.toFixed(100); // the double's full decimal expansion
  const dot = exact.indexOf('.');
  const tail = exact.slice(dot + 7);
  if (!/^50*$/.test(tail)) return up;
  // An exact tie: printf rounds to the even sixth digit.
  const down = exact.slice(0, dot + 7);
  return Number(down.slice(-1)) % 2 === 0 ? down : up;
}

/** The top-k classification of `t` (batch rows when the model batches), as Triton's TopkClassifications. */
export function classify(t: Tensor, k: number, config: ModelConfig, modelDir?: string, lookup?: ModelLookup): Tensor {
  if (!CLASSIFIABLE.has(t.datatype)) {
    throw invalidArg(`class result not available for output due to unsupported type '${t.datatype}'`);
  }
  const view = typedView(t.datatype as Datatype, t.data) as ArrayLike<number | bigint>;
  const values: Array<number | bigint> = Array.from(view);
  // Triton: the first dim is the batch whenever the model batches (TRITONSERVER_BATCH_FIRST_DIM).
  const batched = config.max_batch_size > 0 && t.shape.length > 0;
  const rows = batched ? t.shape[0]! : 1;
  const per = rows ? values.length / rows : 0;
  const labels = labelsOf(config, t.name, modelDir, lookup);
  const count = Math.min(k, per);
  const items: string[] = [];
  for (let r = 0; r < rows; r++) {
    const row = values.slice(r * per, (r + 1) * per);
    const order = row.map((_, i) => i).sort((a, b) => (row[b]! > row[a]! ? 1 : row[b]! < row[a]! ? -1 : a - b));
    for (const i of order.slice(0, count)) {
      const label = labels?.[i];
      const text = `${classValueText(row[i]!, t.datatype)}:${i}`;
      items.push(label ? `${text}:${label}` : text);
    }
  }
  return { name: t.name, datatype: 'BYTES', shape: batched ? [rows, count] : [count], data: serializeBytes(items) };
}
