// Call payloads <-> tensors: the JSON body, a raw body, and multipart forms
// become input tensors checked against the function's specs (from engine
// metadata); engine outputs become the JSON reply. Pure functions; failures
// are catalog errors naming the input at fault.
import { gatewayError } from '../core/errors.ts';
import type { ResolvedFunction, TensorSpec } from './function-registry.ts';
import { CallBodySchema, describeIssues } from './function-schema.ts';
import { decodeValues, elementCount, elementSize, encodeValues, serializeBytes } from './tensor-data.ts';

/** One input ready to send: its spec, concrete shape and raw bytes (LE; BYTES framed). */
export interface InputTensor {
  spec: TensorSpec;
  shape: number[];
  bytes: Uint8Array;
}

/** Datatypes a raw body or a file field can fill. */
export function isByteInput(spec: TensorSpec): boolean {
  return spec.datatype === 'UINT8' || spec.datatype === 'BYTES';
}

/**
 * The concrete shape of `count` elements given as `given` (from nesting or
 * explicitly) for a spec shape with -1 wildcards; null when it does not fit.
 */
export function fitShape(spec: readonly number[], given: readonly number[], count: number): number[] | null {
  const matches = (s: readonly number[]) =>
    s.length === spec.length && s.every((d, i) => spec[i] === -1 || spec[i] === d) && elementCount(s) === count;
  if (matches(given)) return [...given];
  const wild = spec.filter((d) => d < 0).length;
  const fixed = elementCount(spec.filter((d) => d >= 0));
  if (wild === 0) return count === fixed ? [...spec] : null;
  if (wild === 1 && fixed > 0 && count % fixed === 0) return spec.map((d) => (d < 0 ? count / fixed : d));
  return null;
}

/**
 * Deepest nesting of input values accepted. A tensor's rank is small; a body
 * nested thousands deep would otherwise overflow the stack in the recursive
 * walks below (a 500 instead of a 400).
 */
export const MAX_VALUE_NESTING = 64;
const tooDeep = `values are nested deeper than ${MAX_VALUE_NESTING} levels`;

/** True when `v` nests arrays/objects deeper than `max` (iterative: safe on any depth). */
export function nestedDeeperThan(v: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[v, 0]];
  while (stack.length) {
    const [x, d] = stack.pop()!;
    if (x === null || typeof x !== 'object') continue;
    if (d >= max) return true;
    for (const k in x) stack.push([(x as Record<string, unknown>)[k], d + 1]);
  }
  return false;
}

function flatten(v: unknown, depth = 0, shape: number[] = [], out: unknown[] = []): { shape: number[]; values: unknown[] } {
  if (depth > MAX_VALUE_NESTING) throw new Error(tooDeep);
  if (Array.isArray(v)) {
    if (shape.length <= depth) shape.push(v.length);
    else if (shape[depth] !== v.length) throw new Error('nested arrays are ragged');
    for (const x of v) flatten(x, depth + 1, shape, out);
  } else {
    if (shape.length > depth) throw new Error('nested arrays are ragged');
    out.push(v);
  }
  return { shape, values: out };
}

function invalid(fn: ResolvedFunction, spec: TensorSpec, reason: string): never {
  throw gatewayError('INPUT_INVALID', { name: fn.name, input: spec.name, reason });
}

function shaped(fn: ResolvedFunction, spec: TensorSpec, given: number[], count: number): number[] {
  const shape = fitShape(spec.shape, given, count);
  if (!shape) invalid(fn, spec, `shape [${given.join(',')}] (${count} elements) does not fit [${spec.shape.join(',')}]`);
  return shape;
}

/** Bytes for a UINT8 input (shape [n] fitted) or a BYTES input (one element). */
export function bytesInput(fn: ResolvedFunction, spec: TensorSpec, bytes: Uint8Array): InputTensor {
  if (spec.datatype === 'UINT8') return { spec, shape: shaped(fn, spec, [bytes.byteLength], bytes.byteLength), bytes };
  if (spec.datatype === 'BYTES') return { spec, shape: shaped(fn, spec, [1], 1), bytes: serializeBytes([bytes]) };
  return invalid(fn, spec, `raw bytes need a UINT8 or BYTES input, not ${spec.datatype}`);
}

/** One JSON input value to a tensor. */
export function valueInput(fn: ResolvedFunction, spec: TensorSpec, value: unknown): InputTensor {
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    const o = value as { b64?: string; data?: unknown; shape?: number[]; datatype?: string };
    if (typeof o.b64 === 'string') return bytesInput(fn, spec, Buffer.from(o.b64, 'base64'));
    if (o.datatype !== undefined && o.datatype !== spec.datatype) {
      invalid(fn, spec, `datatype ${o.datatype} does not match the expected ${spec.datatype}`);
    }
    if (o.data !== null && typeof o.data === 'object' && !Array.isArray(o.data))
      invalid(fn, spec, "'data' must hold values, not an object");
    const t = valueInput(fn, { ...spec }, o.data);
    if (!o.shape) return t;
    const count = elementCount(t.shape);
    if (elementCount(o.shape) !== count) invalid(fn, spec, `shape [${o.shape.join(',')}] does not hold ${count} elements`);
    return { ...t, shape: shaped(fn, spec, o.shape, count) };
  }
  let flat: { shape: number[]; values: unknown[] };
  try {
    flat = flatten(value);
  } catch (e) {
    return invalid(fn, spec, (e as Error).message);
  }
  let bytes: Uint8Array;
  try {
    bytes = encodeValues(spec.datatype, flat.values);
  } catch (e) {
    return invalid(fn, spec, (e as Error).message);
  }
  return { spec, shape: shaped(fn, spec, flat.shape, flat.values.length), bytes };
}

const isPlain = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && Object.getPrototypeOf(v) === Object.prototype;
const isScalar = (v: unknown) => (typeof v === 'number' && Number.isFinite(v)) || typeof v === 'boolean' || typeof v === 'string';
function isNumberTree(v: unknown, depth = 0): boolean {
  if (!Array.isArray(v)) return isScalar(v);
  if (depth > MAX_VALUE_NESTING) return false;
  for (const x of v) if (!(Array.isArray(x) ? isNumberTree(x, depth + 1) : isScalar(x))) return false;
  return true;
}
function isInputValue(v: unknown): boolean {
  if (!isPlain(v)) return isNumberTree(v);
  let data = false;
  for (const k in v) {
    const x = v[k];
    if (k === 'data') data = isNumberTree(x);
    else if (k === 'shape') {
      if (!Array.isArray(x) || !x.every((d) => Number.isSafeInteger(d) && d >= 0)) return false;
    } else if (k === 'datatype') {
      if (typeof x !== 'string') return false;
    } else if (k === 'b64') {
      return typeof x === 'string' && Object.keys(v).length === 1;
    } else return false;
  }
  return data;
}

/**
 * A cheap check that accepts only bodies CallBodySchema accepts unchanged (a
 * subset of it): the common case skips zod; anything else (including every
 * invalid body) goes through zod, which produces the same result and messages.
 */
function isPlainCallBody(body: unknown): body is { inputs: Record<string, unknown>; outputs?: string[] } {
  if (!isPlain(body)) return false;
  for (const k in body) {
    if (k === 'outputs') {
      const o = body.outputs;
      if (!Array.isArray(o) || !o.every((x) => typeof x === 'string')) return false;
    } else if (k !== 'inputs') return false;
  }
  const inputs = body.inputs;
  if (!isPlain(inputs)) return false;
  for (const k in inputs) if (k === '__proto__' || !isInputValue(inputs[k])) return false;
  return true;
}

/** Inputs of a JSON call body; every spec must be given and nothing else. */
export function jsonInputs(fn: ResolvedFunction, body: unknown): { inputs: InputTensor[]; outputs?: string[] } {
  let given: Record<string, unknown>;
  let outputs: string[] | undefined;
  if (isPlainCallBody(body)) {
    given = body.inputs;
    outputs = body.outputs;
  } else {
    // zod's recursive schema would overflow the stack on a very deep body.
    if (nestedDeeperThan(body, MAX_VALUE_NESTING + 4)) throw gatewayError('BODY_INVALID', { reason: tooDeep });
    const parsed = CallBodySchema.safeParse(body);
    if (!parsed.success) throw gatewayError('BODY_INVALID', { reason: describeIssues(parsed.error).join('; ') });
    given = parsed.data.inputs;
    outputs = parsed.data.outputs;
  }
  for (const k of Object.keys(given)) {
    if (!fn.inputs.some((s) => s.name === k)) throw gatewayError('INPUT_UNKNOWN', { name: fn.name, input: k });
  }
  const inputs = fn.inputs.map((spec) => {
    if (!(spec.name in given)) throw gatewayError('INPUT_MISSING', { name: fn.name, input: spec.name });
    return valueInput(fn, spec, given[spec.name]);
  });
  return { inputs, outputs };
}

/** The single input a raw body fills; RAW_BODY_AMBIGUOUS unless there is exactly one UINT8/BYTES input. */
export function rawBodySpec(fn: ResolvedFunction): TensorSpec {
  if (fn.inputs.length !== 1 || !isByteInput(fn.inputs[0]!)) throw gatewayError('RAW_BODY_AMBIGUOUS', { name: fn.name });
  return fn.inputs[0]!;
}

/** Inputs of a multipart form: file fields give bytes, text fields JSON values (or a plain string for BYTES). */
export async function multipartInputs(fn: ResolvedFunction, form: FormData): Promise<InputTensor[]> {
  for (const k of form.keys()) {
    if (!fn.inputs.some((s) => s.name === k)) throw gatewayError('INPUT_UNKNOWN', { name: fn.name, input: k });
  }
  const out: InputTensor[] = [];
  for (const spec of fn.inputs) {
    const v = form.get(spec.name);
    if (v === null) throw gatewayError('INPUT_MISSING', { name: fn.name, input: spec.name });
    if (typeof v !== 'string') {
      out.push(bytesInput(fn, spec, new Uint8Array(await v.arrayBuffer())));
      continue;
    }
    let value: unknown = v;
    try {
      value = JSON.parse(v);
    } catch {
      if (spec.datatype !== 'BYTES') invalid(fn, spec, 'a text field must hold JSON');
    }
    if (spec.datatype === 'BYTES' && typeof value !== 'string' && !Array.isArray(value)) value = v;
    out.push(valueInput(fn, spec, value));
  }
  return out;
}

/** Byte size of an output whose shape is known before the call, or -1 (BYTES, or a free dim we cannot infer). */
export function predictOutputBytes(fn: ResolvedFunction, spec: TensorSpec, inputs: InputTensor[]): number {
  const size = elementSize(spec.datatype);
  if (!size) return -1;
  let shape = spec.shape;
  // A leading -1 is the batch dim when every input has one: take the batch of the first input.
  if (shape[0] === -1 && fn.inputs.every((s) => s.shape[0] === -1) && inputs.length) {
    shape = [inputs[0]!.shape[0]!, ...shape.slice(1)];
  }
  if (shape.some((d) => d < 0)) return -1;
  return elementCount(shape) * size;
}

/** One engine output with its bytes, as the reply reports it. */
export interface OutputTensor {
  spec: TensorSpec;
  shape: number[];
  datatype: string;
  bytes: Uint8Array;
}

/** The JSON reply for outputs. */
export function outputsJson(outputs: OutputTensor[]): {
  outputs: Record<string, { shape: number[]; datatype: string; data: Array<number | boolean | string> }>;
} {
  const o: Record<string, { shape: number[]; datatype: string; data: Array<number | boolean | string> }> = {};
  for (const t of outputs) o[t.spec.name] = { shape: t.shape, datatype: t.datatype, data: decodeValues(t.datatype, t.bytes) };
  return { outputs: o };
}

/** The media type of a Content-Type header (no parameters, lower case). */
export function mediaType(header: string | undefined): string {
  return (header ?? 'application/octet-stream').split(';')[0]!.trim().toLowerCase();
}

export function isJsonType(type: string): boolean {
  return type === 'application/json' || type.endsWith('+json');
}

/** Bodies that fill the function's single UINT8/BYTES input as they are. */
export function isRawType(type: string): boolean {
  return type.startsWith('image/') || type === 'application/octet-stream' || type.startsWith('audio/') || type.startsWith('video/');
}

/** Inputs of a JSON call body; BODY_INVALID when it is not JSON. */
export function jsonBodyInputs(fn: ResolvedFunction, bytes: Uint8Array): { inputs: InputTensor[]; outputs?: string[] } {
  let body: unknown;
  try {
    body = JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'));
  } catch (e) {
    throw gatewayError('BODY_INVALID', { reason: `not valid JSON: ${(e as Error).message}` });
  }
  return jsonInputs(fn, body);
}

/** Inputs of a multipart call body; BODY_INVALID when it cannot be parsed. */
export async function multipartBodyInputs(fn: ResolvedFunction, form: () => Promise<FormData>): Promise<InputTensor[]> {
  let f: FormData;
  try {
    f = await form();
  } catch (e) {
    throw gatewayError('BODY_INVALID', { reason: `malformed multipart body: ${(e as Error).message}` });
  }
  return multipartInputs(fn, f);
}
