// The small JSON call's inputs without the general walk: per function, a plan
// compiled once (which names, which datatypes, which shapes) takes a parsed
// body and writes its numbers straight into each tensor's bytes, with no flat
// values array and no zod. It accepts only bodies the general path
// (payload-codec.ts jsonInputs) accepts with the same result: anything else
// (a missing or unknown input, a non-number, a ragged array, a shape that does
// not fit, b64, BYTES/BOOL/INT64/FP16 inputs) answers undefined and the caller
// runs jsonInputs, which produces the same tensors or the same error.
// Given `numbers` (a body from json-body.ts parseScanned), a marker string
// stands for an array of those numbers; without it every value is JSON.parse's.
import type { ResolvedFunction, TensorSpec } from './function-registry.ts';
import { markerOf } from './json-body.ts';
import { fitShape, MAX_VALUE_NESTING, type InputTensor } from './payload-codec.ts';

type Typed = Float32Array | Float64Array | Int32Array | Int16Array | Int8Array | Uint32Array | Uint16Array | Uint8Array;
interface Writer {
  make(n: number): Typed;
  /** Integer types: the accepted range [lo, hi). */
  range?: [number, number];
}
const WRITERS: Record<string, Writer> = {
  FP32: { make: (n) => new Float32Array(n) },
  FP64: { make: (n) => new Float64Array(n) },
  INT32: { make: (n) => new Int32Array(n), range: [-(2 ** 31), 2 ** 31] },
  INT16: { make: (n) => new Int16Array(n), range: [-(2 ** 15), 2 ** 15] },
  INT8: { make: (n) => new Int8Array(n), range: [-128, 128] },
  UINT32: { make: (n) => new Uint32Array(n), range: [0, 2 ** 32] },
  UINT16: { make: (n) => new Uint16Array(n), range: [0, 2 ** 16] },
  UINT8: { make: (n) => new Uint8Array(n), range: [0, 256] },
};

interface Plan {
  specs: Array<{ spec: TensorSpec; writer: Writer }>;
}

const plans = new WeakMap<ResolvedFunction, Plan | null>();

/** The function's plan, compiled at its first call (a ResolvedFunction is replaced when its definition or metadata changes). */
function planFor(fn: ResolvedFunction): Plan | null {
  let p = plans.get(fn);
  if (p !== undefined) return p;
  const specs = fn.inputs.map((spec) => ({ spec, writer: WRITERS[spec.datatype] }));
  p = specs.length > 0 && specs.every((s) => s.writer) ? { specs: specs as Plan['specs'] } : null;
  plans.set(fn, p);
  return p;
}

const isPlain = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && Object.getPrototypeOf(v) === Object.prototype;

/** The dims of a nested array by its first elements (a marker counts as an array of its numbers); null past the nesting limit. */
function dimsOf(v: unknown, numbers: Float64Array | undefined): number[] | null {
  const dims: number[] = [];
  let x: unknown = v;
  for (;;) {
    const m = Array.isArray(x) ? undefined : numbers && markerOf(x);
    if (!Array.isArray(x) && !m) break;
    if (dims.length > MAX_VALUE_NESTING) return null;
    if (m) {
      dims.push(m[1]); // at least MIN_SCANNED numbers: the innermost level
      break;
    }
    const a = x as unknown[];
    dims.push(a.length);
    if (a.length === 0) break;
    x = a[0];
  }
  return dims;
}

/** Write the numbers of a marker's span into `out` at `at`, as fill() would from the array it stands for. */
function fillScanned(m: [number, number], numbers: Float64Array, out: Typed, at: number, range: [number, number] | undefined): number {
  for (let i = m[0], end = m[0] + m[1]; i < end; i++) {
    const x = numbers[i]!;
    if (!Number.isFinite(x)) return -1;
    if (range && (!Number.isInteger(x) || x < range[0] || x >= range[1])) return -1;
    out[at++] = x;
  }
  return at;
}

/** Write the numbers of `v` (dims `dims` from `depth`) into `out` at `at`; the next index, or -1 when the general path must decide. */
function fill(
  v: unknown,
  dims: number[],
  depth: number,
  out: Typed,
  at: number,
  range: [number, number] | undefined,
  numbers: Float64Array | undefined,
): number {
  if (!Array.isArray(v)) {
    // A marker: an array of numbers only, so it fits only the innermost level.
    const m = numbers && markerOf(v);
    return m && depth === dims.length - 1 && m[1] === dims[depth] ? fillScanned(m, numbers!, out, at, range) : -1;
  }
  if (v.length !== dims[depth]) return -1;
  if (depth === dims.length - 1) {
    for (let i = 0; i < v.length; i++) {
      const x = v[i];
      if (typeof x !== 'number' || !Number.isFinite(x)) return -1;
      if (range && (!Number.isInteger(x) || x < range[0] || x >= range[1])) return -1;
      out[at++] = x;
    }
    return at;
  }
  for (let i = 0; i < v.length; i++) {
    const x = v[i];
    at = fill(x, dims, depth + 1, out, at, range, numbers);
    if (at < 0) return -1;
  }
  return at;
}

function tensorOf(spec: TensorSpec, writer: Writer, value: unknown, numbers: Float64Array | undefined): InputTensor | undefined {
  let data: unknown = value;
  let declared: number[] | undefined;
  if (isPlain(value)) {
    for (const k in value) {
      if (k === 'data') continue;
      if (k === 'shape') {
        const s = value.shape;
        if (!Array.isArray(s) || !s.every((d) => Number.isSafeInteger(d) && d >= 0)) return undefined;
        declared = s as number[];
      } else if (k !== 'datatype' || value.datatype !== spec.datatype) return undefined;
    }
    data = value.data;
  }
  if (!Array.isArray(data) && !(numbers && markerOf(data))) return undefined;
  const dims = dimsOf(data, numbers);
  if (!dims || dims[dims.length - 1] === 0) return undefined;
  let count = 1;
  for (const d of dims) count *= d;
  const out = writer.make(count);
  if (fill(data, dims, 0, out, 0, writer.range, numbers) !== count) return undefined;
  // As valueInput: the nesting must fit the spec, then a declared shape must hold the count and fit too.
  let shape = fitShape(spec.shape, dims, count);
  if (shape && declared) {
    let n = 1;
    for (const d of declared) n *= d;
    shape = n === count ? fitShape(spec.shape, declared, count) : null;
  }
  if (!shape) return undefined;
  return { spec, shape, bytes: Buffer.from(out.buffer, out.byteOffset, out.byteLength) };
}

/** The inputs (and requested outputs) of a plain JSON body, or undefined when the general path must decide. */
export function fastJsonInputs(
  fn: ResolvedFunction,
  body: unknown,
  numbers?: Float64Array,
): { inputs: InputTensor[]; outputs?: string[] } | undefined {
  const plan = planFor(fn);
  if (!plan || !isPlain(body)) return undefined;
  let outputs: string[] | undefined;
  for (const k in body) {
    if (k === 'outputs') {
      const o = body.outputs;
      if (!Array.isArray(o) || !o.every((x) => typeof x === 'string')) return undefined;
      outputs = o as string[];
    } else if (k !== 'inputs') return undefined;
  }
  const given = body.inputs;
  if (!isPlain(given)) return undefined;
  let n = 0;
  for (const k in given) {
    if (k === '__proto__') return undefined;
    n++;
  }
  if (n !== plan.specs.length) return undefined;
  const inputs: InputTensor[] = [];
  for (const { spec, writer } of plan.specs) {
    if (!Object.prototype.hasOwnProperty.call(given, spec.name)) return undefined;
    const t = tensorOf(spec, writer, given[spec.name], numbers);
    if (!t) return undefined;
    inputs.push(t);
  }
  return { inputs, outputs };
}
