// Triton's generate extension (docs/protocol/extension_generate.md): its flat
// JSON request <-> the engine's InferRequest, and a response -> its flat JSON
// reply. Keys naming a model input become that input (shaped to the config's
// dims), the reserved `parameters` object and every other key become request
// parameters; the reply holds model_name, model_version and each output by
// name (one element as a scalar, more as a flat array). Pure functions.
import { decodeValues, encodeValues, TensorValueError } from '../../../protocol/tensor-codec.ts';
import { fromConfigType, type Datatype } from '../../api/datatypes.ts';
import type { InferInput, InferRequest, InferResponse, ParamValue } from '../../api/infer-request.ts';
import type { ModelConfig } from '../../api/model-config.ts';
import { invalidArg } from '../../api/status.ts';
import { parseJson } from './infer-json.ts';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The keys of a JSON text's top-level object, in order and with repeats (what
 * JSON.parse hides: its last duplicate wins). Call only on text that parsed.
 */
export function topLevelKeys(text: string): string[] {
  const keys: string[] = [];
  let depth = 0;
  let expectKey = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (ch === '"') {
      let j = i + 1;
      while (text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      if (depth === 1 && expectKey) keys.push(JSON.parse(text.slice(i, j + 1)) as string);
      expectKey = false;
      i = j;
    } else if (ch === '{' || ch === '[') {
      depth++;
      expectKey = depth === 1 && ch === '{';
    } else if (ch === '}' || ch === ']') {
      depth--;
    } else if (ch === ',' && depth === 1) {
      expectKey = true;
    }
  }
  return keys;
}

/** Triton's JSON-access wording for an element of the wrong JSON type. */
function wrongType(dt: Datatype): string {
  if (dt === 'BYTES') return 'attempt to access JSON non-string as string';
  if (dt === 'BOOL') return 'attempt to access JSON non-boolean as boolean';
  if (dt.startsWith('UINT')) return 'attempt to access JSON non-unsigned-integer as unsigned-integer';
  if (dt.startsWith('INT')) return 'attempt to access JSON non-signed-integer as signed-integer';
  return 'attempt to access JSON non-number as number';
}

const fitsJsonType = (dt: Datatype, v: unknown): boolean =>
  dt === 'BYTES' ? typeof v === 'string' : dt === 'BOOL' ? typeof v === 'boolean' : typeof v === 'number';

/**
 * The shape of `n` elements for an input declared with `dims`: a batch of one
 * when the model batches, the last variable dim takes what the fixed dims
 * leave, other variable dims are 1. When the count cannot fit, `[n]` (the
 * engine's shape check then names the input).
 */
export function generateShape(config: ModelConfig, dims: readonly number[], n: number): number[] {
  const full = config.max_batch_size > 0 ? [1, ...dims] : [...dims];
  const fixed = full.reduce((p, d) => (d >= 0 ? p * d : p), 1);
  const lastVar = full.lastIndexOf(-1);
  if (lastVar < 0) return fixed === n ? full : [n];
  if (fixed === 0 || n % fixed !== 0) return [n];
  return full.map((d, i) => (d >= 0 ? d : i === lastVar ? n / fixed : 1));
}

function toInput(config: ModelConfig, name: string, value: unknown): InferInput {
  const decl = config.input.find((i) => i.name === name)!;
  const datatype = fromConfigType(decl.data_type);
  const values = Array.isArray(value) ? value.flat(Infinity) : [value];
  for (const v of values) if (!fitsJsonType(datatype, v)) throw invalidArg(wrongType(datatype));
  let data: Uint8Array;
  try {
    data = encodeValues(datatype, values);
  } catch (err) {
    const e = err as Error;
    throw invalidArg(
      err instanceof TensorValueError ? `element ${err.index} of input '${name}' is not a valid ${datatype} value` : e.message,
    );
  }
  return { name, datatype, shape: generateShape(config, decl.dims, values.length), data };
}

function toParameter(key: string, v: unknown, into: Record<string, ParamValue>): void {
  if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean' && typeof v !== 'bigint')
    throw invalidArg(`parameter '${key}' has invalid type`);
  into[key] = v;
}

const lost = (v: unknown) => typeof v === 'number' && !Number.isSafeInteger(v) && Number.isInteger(v);

/** Whether a parameter (not an input) came out of JSON.parse as an integer past 2^53 (a sequence_id is a uint64). */
function parametersLost(doc: Record<string, unknown>, inputNames: ReadonlySet<string>): boolean {
  for (const [key, value] of Object.entries(doc)) {
    if (inputNames.has(key)) continue;
    if (key === 'parameters' && isObject(value) && Object.values(value).some(lost)) return true;
    if (lost(value)) return true;
  }
  return false;
}

/** A generate request body -> the engine's request for `model` (whose config is `config`). */
export function parseGenerateRequest(body: Buffer, config: ModelConfig, model: string, version: string | undefined): InferRequest {
  const text = body.toString('utf8');
  const doc = parseJson(text, 'generate request');
  if (!isObject(doc)) throw invalidArg('the generate request must be a JSON object');
  const inputNames = new Set(config.input.map((i) => i.name));
  // Parameters read again with exact integers when one went past 2^53 (inputs keep JSON.parse's values).
  const exact = parametersLost(doc, inputNames) ? (parseJson(text, 'generate request', true) as Record<string, unknown>) : doc;
  const inputs: InferInput[] = [];
  const parameters: Record<string, ParamValue> = {};
  const seen = new Set<string>();
  // Duplicated keys: Triton refuses a repeated input, naming the first repeated in text order.
  for (const key of topLevelKeys(text)) {
    if (seen.has(key) && inputNames.has(key)) throw invalidArg(`input '${key}' already exists in request`);
    seen.add(key);
  }
  for (const [key, value] of Object.entries(doc)) {
    if (inputNames.has(key)) inputs.push(toInput(config, key, value));
    else if (key === 'parameters') {
      if (!isObject(value)) throw invalidArg(`parameter 'parameters' has invalid type`);
      for (const [k, v] of Object.entries(exact.parameters as Record<string, unknown>)) toParameter(k, v, parameters);
    } else toParameter(key, exact[key], parameters);
  }
  return { modelName: model, modelVersion: version, inputs, outputs: [], parameters };
}

/** One response as the generate reply object. */
export function generateResponseJson(res: InferResponse): Record<string, unknown> {
  const out: Record<string, unknown> = { model_name: res.modelName, model_version: res.modelVersion };
  for (const t of res.outputs) {
    const values = decodeValues(t.datatype, t.data, t.name);
    out[t.name] = values.length === 1 ? values[0] : values;
  }
  return out;
}
