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
import { serializeBytes } from '../api/datatypes.ts';
import { decodeValues } from '../../protocol/tensor-codec.ts';
import { invalidArg } from '../api/status.ts';

const labelCache = new Map<string, string[]>();

/** A model's config and folder, by name and step version (-1 = latest ready); undefined when not loaded. */
export type ModelLookup = (name: string, version: number) => { config: ModelConfig; dir: string } | undefined;

/** The labels of `output`: its own label_filename, else (ensembles) those of the step output that writes it. */
export function labelsOf(config: ModelConfig, output: string, modelDir: string | undefined, lookup?: ModelLookup, depth = 0): string[] | undefined {
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

/** The top-k classification of `t` (batch rows when the model batches). */
export function classify(t: Tensor, k: number, config: ModelConfig, modelDir?: string, lookup?: ModelLookup): Tensor {
  if (t.datatype === 'BYTES' || t.datatype === 'BOOL') {
    throw invalidArg(`classification of output '${t.name}' needs a numeric tensor, not ${t.datatype}`);
  }
  const values = decodeValues(t.datatype, t.data) as number[];
  const batched = config.max_batch_size > 0 && t.shape.length > 1;
  const rows = batched ? t.shape[0]! : 1;
  const per = rows ? values.length / rows : 0;
  const labels = labelsOf(config, t.name, modelDir, lookup);
  const count = Math.min(k, per);
  const items: string[] = [];
  for (let r = 0; r < rows; r++) {
    const row = values.slice(r * per, (r + 1) * per);
    const order = row.map((v, i) => i).sort((a, b) => row[b]! - row[a]! || a - b);
    for (const i of order.slice(0, count)) {
      const label = labels?.[i];
      items.push(label ? `${row[i]}:${i}:${label}` : `${row[i]}:${i}`);
    }
  }
  return { name: t.name, datatype: 'BYTES', shape: batched ? [rows, count] : [count], data: serializeBytes(items) };
}
