// The "rows" reply of a function (functions/<name>.json `rows`): outputs that
// share their first dim become one JSON object per row, e.g. OCR's lines,
// boxes and confidences as [{text, box, confidence}]. Pure functions.
import { z } from 'zod';
import { gatewayError } from '../core/errors.ts';
import type { ResolvedFunction } from './function-registry.ts';
import type { RowsReply } from './function-schema.ts';
import { outputsJson, type OutputTensor } from './payload-codec.ts';
import { decodeValues } from './tensor-data.ts';

type Value = number | boolean | string | Value[];

/** Nest flat values by `dims` (row-major); [] gives the single value. */
function nest(values: Array<number | boolean | string>, dims: number[], at = 0): Value {
  if (dims.length === 0) return values[at]!;
  const [d, ...rest] = dims;
  const step = rest.reduce((n, x) => n * x, 1);
  return Array.from({ length: d! }, (_, i) => nest(values, rest, at + i * step));
}

/** True when every field's output is among `outputs` (a call may have asked for fewer). */
export function hasRowFields(rows: RowsReply, outputs: OutputTensor[]): boolean {
  return Object.values(rows.fields).every((o) => outputs.some((t) => t.spec.name === o));
}

/** `{[key]: [{field: value}, ...]}`; ENGINE_ERROR when the outputs' first dims disagree. */
export function rowsJson(fnName: string, rows: RowsReply, outputs: OutputTensor[]): Record<string, Array<Record<string, Value>>> {
  const cols = Object.entries(rows.fields).map(([field, name]) => {
    const t = outputs.find((o) => o.spec.name === name)!;
    if (t.shape.length === 0) throw gatewayError('ENGINE_ERROR', { name: fnName });
    return { field, count: t.shape[0]!, dims: t.shape.slice(1), values: decodeValues(t.datatype, t.bytes) };
  });
  const count = cols[0]!.count;
  if (cols.some((c) => c.count !== count)) throw gatewayError('ENGINE_ERROR', { name: fnName });
  const out: Array<Record<string, Value>> = [];
  for (let i = 0; i < count; i++) {
    const row: Record<string, Value> = {};
    for (const c of cols) {
      const per = c.dims.reduce((n, x) => n * x, 1);
      row[c.field] = nest(c.values, c.dims, i * per);
    }
    out.push(row);
  }
  return { [rows.key]: out };
}

/** The JSON reply of a call: rows when the function asks for them and the call got all their outputs, else the tensors. */
export function replyJson(fn: ResolvedFunction, outputs: OutputTensor[]): unknown {
  const rows = fn.definition.rows;
  return rows && hasRowFields(rows, outputs) ? rowsJson(fn.name, rows, outputs) : outputsJson(outputs);
}

const valueSchema = (datatype: string, dims: number[]): z.ZodType => {
  let s: z.ZodType = datatype === 'BYTES' ? z.string() : datatype === 'BOOL' ? z.boolean() : z.number();
  for (let i = dims.length - 1; i >= 0; i--) s = dims[i]! >= 0 ? z.array(s).length(dims[i]!) : z.array(s);
  return s;
};

/** The reply schema of a function with `rows` (for OpenAPI). */
export function rowsReplySchemaFor(fn: ResolvedFunction, rows: RowsReply): z.ZodType {
  const fields = Object.fromEntries(
    Object.entries(rows.fields).map(([field, name]) => {
      const o = fn.outputs.find((x) => x.name === name);
      return [field, o ? valueSchema(o.datatype, o.shape.slice(1)).describe(`${o.datatype}, row of output '${name}'`) : z.unknown()];
    }),
  );
  return z.object({ [rows.key]: z.array(z.object(fields)) });
}
