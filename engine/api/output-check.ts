// Checks of a response's outputs against the model's config, each as strict
// as Triton is for that backend and no stricter. For every backend, as
// Triton's core (InferenceResponse::AddOutput): every output is one the
// config declares. Beyond that, `outputRules` says, per backend, what Triton
// checks: its python backend sends what the model made (datatype and shape
// as the numpy array has them; a requested output the model left out is just
// absent), its onnxruntime backend what ONNX Runtime made (checked against
// the config once, at load), an ensemble what its steps made; a backend of
// no known kind gets every check. Always, whatever the backend: a tensor is
// well formed (a known datatype, a shape of whole sizes, exactly the bytes
// its shape needs), which numpy and ONNX Runtime guarantee in Triton and our
// frontends rely on. The infer pipeline runs it on every backend's
// responses; the response cache, with every check, on each value it reads
// back and each it would keep. Pure, no I/O.
import type { ModelConfig, ModelTensorConfig } from './model-config.ts';
import type { InferRequest, Tensor } from './infer-request.ts';
import { elementCount, elementSize, fromConfigType, isDatatype, toConfigType, type Datatype } from './datatypes.ts';
import { invalidArg, type StatusError } from './status.ts';
import { lookupsOf } from './config-lookups.ts';

/** What a backend's responses are held to beyond declared names and well-formed tensors. */
export interface OutputRules {
  /** The output's datatype is the config's. */
  datatype: boolean;
  /** The output's shape fits the config's dims, its batch dimension the request's batch size. */
  shape: boolean;
  /** Every wanted (requested, else declared) output is there. */
  wanted: boolean;
}

/** Every check: a backend of no known kind, and the response cache's reads (a value from Redis is not trusted). */
export const EVERY_CHECK: OutputRules = { datatype: true, shape: true, wanted: true };
/** Triton's python and onnxruntime backends and its ensembles send outputs as the model made them. */
const AS_MADE: OutputRules = { datatype: false, shape: false, wanted: false };

/**
 * The rules for `config`'s backend: python (and js, our other backend of
 * user code, held to the python backend's rules), onnxruntime and ensembles
 * send outputs as made; any other backend gets every check.
 */
export function outputRules(config: Pick<ModelConfig, 'backend' | 'platform'>): OutputRules {
  const backend =
    config.platform === 'ensemble' ? 'ensemble' : (config.backend ?? (config.platform === 'onnxruntime_onnx' ? 'onnxruntime' : undefined));
  switch (backend) {
    case 'python':
    case 'js':
    case 'onnxruntime':
    case 'ensemble':
      return AS_MADE;
    default:
      return EVERY_CHECK;
  }
}

/** An output as a response holds it; one written into a client's region has `shm` and no bytes here. */
export type CheckedOutput = Tensor & { shm?: unknown };

const fmt = (s: readonly number[]) => `[${s.join(',')}]`;

/**
 * The request's batch size when the model batches and the request says it
 * (first input's first dim, no ragged input); undefined otherwise.
 */
export function requestBatch(config: ModelConfig, req: Pick<InferRequest, 'inputs'>): number | undefined {
  if (!(config.max_batch_size > 0) || req.inputs.length === 0) return undefined;
  const ragged = lookupsOf(config).ragged;
  if (ragged.size > 0) for (const t of req.inputs) if (ragged.has(t.name)) return undefined;
  return req.inputs[0]!.shape[0];
}

/**
 * The first problem of `outputs` as INVALID_ARG naming the output and the
 * model (Triton's texts), or undefined. `wanted` names the outputs that must
 * be there (the requested ones, or all the model's) when the rules check
 * that; `batch` is the request's batch size (requestBatch) when known.
 */
export function checkOutputs(
  config: ModelConfig,
  outputs: readonly CheckedOutput[],
  wanted: readonly string[],
  batch: number | undefined,
  rules: OutputRules = outputRules(config),
): StatusError | undefined {
  const model = config.name;
  const look = lookupsOf(config);
  for (let k = 0; k < outputs.length; k++) {
    const o = outputs[k]!;
    const decl = look.outputs.get(o.name);
    if (!decl) return invalidArg(`unexpected inference output '${o.name}' for model '${model}'`);
    if (namedBefore(outputs, k)) return invalidArg(`output '${o.name}' appears twice in the response of model '${model}'`);
    const problem = checkOne(config, decl, look.outputShapes.get(o.name)!, o, batch, rules);
    if (problem) return problem;
  }
  if (!rules.wanted) return undefined;
  for (let k = 0; k < wanted.length; k++) {
    const name = wanted[k]!;
    if (!namedIn(outputs, name)) return invalidArg(`output '${name}' of model '${model}' is missing from the response (it was requested)`);
  }
  return undefined;
}

function namedBefore(outputs: readonly CheckedOutput[], k: number): boolean {
  const name = outputs[k]!.name;
  for (let j = 0; j < k; j++) if (outputs[j]!.name === name) return true;
  return false;
}

function namedIn(outputs: readonly CheckedOutput[], name: string): boolean {
  for (let k = 0; k < outputs.length; k++) if (outputs[k]!.name === name) return true;
  return false;
}

/** `allowed`: the output's shapes from the config (config-lookups.ts). */
function checkOne(
  config: ModelConfig,
  decl: ModelTensorConfig,
  allowed: ReadonlyArray<readonly number[]>,
  o: CheckedOutput,
  batch: number | undefined,
  rules: OutputRules,
): StatusError | undefined {
  const model = config.name;
  const want = fromConfigType(decl.data_type);
  const dt = o.datatype as string;
  if (!isDatatype(dt)) return invalidArg(`output '${o.name}' of model '${model}' has an unknown datatype '${String(dt)}'`);
  if (rules.datatype && dt !== want) {
    return invalidArg(
      `unexpected datatype ${toConfigType(dt)} for inference output '${o.name}', expecting ${toConfigType(want)} for model '${model}'`,
    );
  }
  const shape = o.shape as unknown;
  if (!wellFormed(shape)) {
    return invalidArg(`output '${o.name}' of model '${model}' has a malformed shape ${JSON.stringify(shape)}`);
  }
  const batched = config.max_batch_size > 0;
  // A reshaped output may come back in the model's own shape or the config's.
  const fitsOne = anyFits(allowed, shape);
  if (rules.shape && (!fitsOne || (batched && batch !== undefined && shape[0] !== batch))) {
    const why = batched && batch !== undefined && fitsOne ? ` (the request's batch size is ${batch})` : '';
    return invalidArg(
      `unexpected shape for output '${o.name}', model configuration shape is ${fmt(allowed[0]!)}, inference shape is ${fmt(shape)} for model '${model}'${why}`,
    );
  }
  if (o.shm) return undefined; // the bytes are in a client's region, sized when written
  return checkBytes(model, o.name, dt, shape, o.data);
}

function wellFormed(shape: unknown): shape is number[] {
  if (!Array.isArray(shape)) return false;
  for (let i = 0; i < shape.length; i++) if (!Number.isSafeInteger(shape[i]) || shape[i] < 0) return false;
  return true;
}

/** Whether `shape` fits one of `allowed` (-1: any size). */
function anyFits(allowed: ReadonlyArray<readonly number[]>, shape: readonly number[]): boolean {
  for (const dims of allowed) {
    if (dims.length !== shape.length) continue;
    let ok = true;
    for (let i = 0; i < dims.length && ok; i++) ok = dims[i] === -1 || dims[i] === shape[i];
    if (ok) return true;
  }
  return false;
}

function checkBytes(model: string, name: string, dt: Datatype, shape: readonly number[], data: Uint8Array): StatusError | undefined {
  const count = elementCount(shape);
  if (dt === 'BYTES') {
    const n = countBytesElements(data);
    if (n !== count) {
      return invalidArg(
        `expected ${count} string elements for inference output '${name}' for model '${model}', got ${n < 0 ? 'a malformed buffer' : n}`,
      );
    }
    return undefined;
  }
  const expected = elementSize(dt) * count;
  if (data.byteLength !== expected) {
    return invalidArg(`output byte size mismatch for output '${name}' for model '${model}'. Expected ${expected}, got ${data.byteLength}`);
  }
  return undefined;
}

/** Elements of a serialized BYTES tensor (4-byte little-endian length, then the bytes), or -1 when malformed. No copies. */
export function countBytesElements(data: Uint8Array): number {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  let at = 0;
  let n = 0;
  while (at < data.byteLength) {
    if (at + 4 > data.byteLength) return -1;
    const len = view.getUint32(at, true);
    at += 4 + len;
    if (at > data.byteLength) return -1;
    n++;
  }
  return n;
}
