// over 300 lines: past 300 only since the formatter wrapped its long lines (issue 38); to be split
// POST /fn/<name>, top to bottom with one error exit (thrown catalog errors
// reach app.ts's onError): resolve the function, check the key and the size,
// read the inputs (a large raw body streams straight into a staging slice),
// build ModelInfer (inline bytes, or shm region/offset/size parameters with
// outputs landing in an output slice), submit through the engine client,
// reply JSON or one output's raw bytes. Slices go back to the arena when the
// reply has been built.
import type { Context } from 'hono';
import type { GatewayEnv } from '../core/gateway-env.ts';
import type { InferInputTensor, InferRequestedOutputTensor, ModelInferRequest, ModelInferResponse } from '../../client/grpc-client.ts';
import { checkApiKey } from './api-key.ts';
import { contentLength, readBody, readBodyInto, tooLarge } from './body-reader.ts';
import type { EngineApi } from '../upstream/engine-client.ts';
import { gatewayError, GatewayError } from '../core/errors.ts';
import type { FunctionRegistry, ResolvedFunction, TensorSpec } from './function-registry.ts';
import type { GatewayMetrics } from '../core/metrics.ts';
import type { GatewayTracing } from '../core/otel.ts';
import {
  bytesInput,
  isJsonType,
  isRawType,
  jsonBodyInputs,
  mediaType,
  multipartBodyInputs,
  predictOutputBytes,
  rawBodySpec,
  type InputTensor,
  type OutputTensor,
} from './payload-codec.ts';
import { binaryOutput, selectOutputs } from './output-select.ts';
import { replyJsonText } from './reply-text.ts';
import type { StagingArena, StagingSlice } from '../staging/staging-arena.ts';
import { elementCount, elementSize } from './tensor-data.ts';
import { tracer } from '../../common/logger.ts';
import { onNoSlice } from './staging-fallback.ts';
import type { CallMeta, CallRouter, PlanGate } from './call-route.ts';

const trace = tracer('invoke');

export interface InvokeDeps {
  registry: FunctionRegistry;
  engine: EngineApi;
  arena?: StagingArena;
  metrics?: GatewayMetrics;
  /** Bodies above this many bytes are staged through shm. */
  shmThreshold: number;
  /** The largest payload sent inline when no staging slice is free while shm is exhausted (staging-fallback.ts); default the engine's gRPC limit less 1 MiB. */
  maxInlineBytes?: number;
  /** OpenTelemetry spans per call (GATEWAY_OTLP_URL); absent = no tracing. */
  tracing?: GatewayTracing;
  /** Canary split, gates and shadow traffic (gateway/delivery/); absent = every call on the function as resolved. */
  delivery?: CallRouter;
  /** Usage plans per API key (gateway/plans/); absent = no rate limits or quotas. */
  plans?: PlanGate;
}

/** An input with where its bytes live: a staging slice or (absent) inline. */
export interface Placed extends InputTensor {
  at?: { region: string; offset: number };
}

/** Slices one call holds; all go back to the arena at the end of the call. */
export class CallSlices {
  private readonly held: StagingSlice[] = [];
  /** How the payload went to the engine on the call's last attempt; replies (errors too) report it. */
  transfer: 'inline' | 'shm' = 'inline';
  constructor(private readonly arena: StagingArena | undefined) {}
  alloc(size: number): StagingSlice | null {
    const s = this.arena?.alloc(size) ?? null;
    if (s) this.held.push(s);
    return s;
  }
  releaseAll(): void {
    for (const s of this.held.splice(0)) s.release();
  }
}

const shmParams = (region: string, offset: number, size: number) => ({
  shared_memory_region: { string_param: region },
  shared_memory_offset: { int64_param: offset },
  shared_memory_byte_size: { int64_param: size },
});

/** Read the inputs of a call, staging a large raw body straight into a slice when possible. */
export async function readInputs(
  c: Context,
  fn: ResolvedFunction,
  deps: InvokeDeps,
  slices: CallSlices,
): Promise<{ inputs: Placed[]; outputs?: string[] }> {
  const limit = fn.definition.limits.maxBodyBytes;
  const len = contentLength(c);
  if (len !== undefined && len > limit) throw tooLarge(c, fn.name, limit);
  const type = mediaType(c.req.header('content-type'));
  if (isJsonType(type)) return jsonBodyInputs(fn, await readBody(c, limit, fn.name));
  if (type === 'multipart/form-data') {
    // Read under the limit first (chunked forms have no Content-Length to check), then parse.
    const bytes = await readBody(c, limit, fn.name);
    const form = () => new Response(bytes, { headers: { 'Content-Type': c.req.header('content-type')! } }).formData();
    return { inputs: await multipartBodyInputs(fn, form) };
  }
  if (!isRawType(type)) throw gatewayError('MEDIA_TYPE_UNSUPPORTED', { type });
  const spec = rawBodySpec(fn);
  if (len !== undefined && len > deps.shmThreshold) {
    const prefix = spec.datatype === 'BYTES' ? 4 : 0;
    const slice = slices.alloc(len + prefix);
    if (slice) {
      if (prefix) new DataView(slice.bytes.buffer, slice.bytes.byteOffset, 4).setUint32(0, len, true);
      await readBodyInto(c, slice.bytes.subarray(prefix), len);
      const t = bytesInput(fn, spec, slice.bytes.subarray(prefix));
      return { inputs: [{ spec, shape: t.shape, bytes: slice.bytes, at: { region: slice.region, offset: slice.offset } }] };
    }
    onNoSlice(deps, len + prefix, false); // refuse before reading a body that cannot go inline either; runOnEngine counts the fallback
  }
  return { inputs: [bytesInput(fn, spec, await readBody(c, limit, fn.name))] };
}

/** Place every input in shm (all or none: inline and shm inputs are never mixed in one request). */
function stageInputs(inputs: Placed[], slices: CallSlices): boolean {
  for (const t of inputs) {
    if (t.at) continue;
    const s = slices.alloc(t.bytes.byteLength);
    if (!s) return false;
    s.bytes.set(t.bytes);
    t.bytes = s.bytes;
    t.at = { region: s.region, offset: s.offset };
  }
  return true;
}

/** A Hono call's outputs (`?output=`, the body's list) and its binary output, by output-select.ts. */
export function callOutputs(fn: ResolvedFunction, wanted: string[] | undefined, c: Context): { specs: TensorSpec[]; binary?: TensorSpec } {
  const specs = selectOutputs(fn, c.req.query('output'), wanted);
  return { specs, binary: binaryOutput(fn, specs, c.req.header('accept')) };
}

export function buildRequest(
  fn: ResolvedFunction,
  id: string,
  inputs: Placed[],
  outputs: InferRequestedOutputTensor[],
  staged: boolean,
): ModelInferRequest {
  const tensors: InferInputTensor[] = inputs.map((t) => ({
    name: t.spec.tensor,
    datatype: t.spec.datatype,
    shape: t.shape,
    ...(staged && t.at ? { parameters: shmParams(t.at.region, t.at.offset, t.bytes.byteLength) } : {}),
  }));
  return {
    model_name: fn.model,
    model_version: fn.version,
    id,
    inputs: tensors,
    outputs,
    ...(staged ? {} : { raw_input_contents: inputs.map((t) => t.bytes) }),
  };
}

type OutputPlaces = ReadonlyMap<string, { slice: StagingSlice; offset: number; size: number }>;
/** An inline call's places: none (one empty map for every such call). */
const NO_PLACES: OutputPlaces = new Map();

/** Requested outputs; for a staged call, those of predictable size land in one output slice. */
function placeOutputs(
  fn: ResolvedFunction,
  specs: TensorSpec[],
  inputs: Placed[],
  staged: boolean,
  slices: CallSlices,
): { requested: InferRequestedOutputTensor[]; at: OutputPlaces } {
  if (!staged) return { requested: specs.map((s) => ({ name: s.tensor })), at: NO_PLACES };
  const at = new Map<string, { slice: StagingSlice; offset: number; size: number }>();
  const sizes = specs.map((s) => predictOutputBytes(fn, s, inputs));
  const aligned = (n: number) => Math.ceil(n / 64) * 64;
  const total = sizes.reduce((n, s) => n + (s > 0 ? aligned(s) : 0), 0);
  const slice = total > 0 ? slices.alloc(total) : null;
  if (slice) {
    let off = 0;
    specs.forEach((s, i) => {
      if (sizes[i]! <= 0) return;
      at.set(s.tensor, { slice, offset: off, size: sizes[i]! });
      off += aligned(sizes[i]!);
    });
  }
  const requested: InferRequestedOutputTensor[] = specs.map((s) => {
    const p = at.get(s.tensor);
    return p ? { name: s.tensor, parameters: shmParams(p.slice.region, p.slice.offset + p.offset, p.size) } : { name: s.tensor };
  });
  return { requested, at };
}

export function collectOutputs(res: ModelInferResponse, specs: TensorSpec[], at: OutputPlaces): OutputTensor[] {
  // A call asks for a few outputs: a scan of them costs less than a map built per call.
  const byTensor: { get(name: string): TensorSpec | undefined } =
    specs.length > 8 ? new Map(specs.map((s) => [s.tensor, s])) : { get: (name) => specs.find((s) => s.tensor === name) };
  const raw = res.raw_output_contents ?? [];
  const aligned = raw.length === res.outputs.length;
  let next = 0;
  const out: OutputTensor[] = [];
  res.outputs.forEach((o, i) => {
    const spec = byTensor.get(o.name);
    const shape = (o.shape ?? []).map(Number);
    const place = at.get(o.name);
    let bytes: Uint8Array;
    if (place) {
      const n = elementCount(shape) * elementSize(o.datatype);
      bytes = place.slice.bytes.subarray(place.offset, place.offset + Math.min(n, place.size));
      if (aligned) next++;
    } else {
      bytes = (aligned ? raw[i] : raw[next++]) ?? new Uint8Array(0);
    }
    if (spec) out.push({ spec, shape, datatype: o.datatype, bytes });
  });
  return out;
}

/**
 * Whether an engine failure is of the kind an unknown shm region gives:
 * INVALID_ARGUMENT (ours and Triton's) or NOT_FOUND, by status code, never by
 * the message text. Timeouts, outages and internal errors never retry.
 */
export function mayBeRegionLost(e: unknown): e is GatewayError {
  return e instanceof GatewayError && (e.code === 'ENGINE_REJECTED' || e.code === 'FUNCTION_UNAVAILABLE');
}

/** Retry inline only when a region this call used was really missing on the engine (its status said so). */
export function retryInline(used: ReadonlyArray<string | undefined>, missing: readonly string[]): boolean {
  return used.some((r) => r !== undefined && missing.includes(r));
}

/**
 * Run one call of `fn` on the engine, independent of HTTP (async jobs use it
 * too): stage inputs through `slices` when the payload is above the
 * threshold, request outputs into an output slice, retry inline once if the
 * engine lost our regions. Output bytes may view slices: read them before
 * slices.releaseAll().
 */
export async function runFunction(
  deps: InvokeDeps,
  fn: ResolvedFunction,
  inputs: Placed[],
  specs: TensorSpec[],
  id: string,
  slices: CallSlices,
  traceparent?: string,
  meta?: CallMeta,
): Promise<{ outputs: OutputTensor[]; transfer: 'inline' | 'shm'; side?: string }> {
  if (deps.delivery)
    return deps.delivery.run(fn, id, meta, inputs, specs, (f) => runOnEngine(deps, f, inputs, specs, id, slices, traceparent));
  return runOnEngine(deps, fn, inputs, specs, id, slices, traceparent);
}

async function runOnEngine(
  deps: InvokeDeps,
  fn: ResolvedFunction,
  inputs: Placed[],
  specs: TensorSpec[],
  id: string,
  slices: CallSlices,
  traceparent?: string,
): Promise<{ outputs: OutputTensor[]; transfer: 'inline' | 'shm' }> {
  const total = inputs.reduce((n, t) => n + t.bytes.byteLength, 0);
  let staged = inputs.some((t) => t.at) || (total > deps.shmThreshold && !!deps.arena);
  if (staged) {
    staged = stageInputs(inputs, slices);
    if (!staged) onNoSlice(deps, total, true);
  }
  slices.transfer = staged ? 'shm' : 'inline';
  const timeoutMs = fn.definition.limits.timeoutMs;
  let { requested, at } = placeOutputs(fn, specs, inputs, staged, slices);
  let res: ModelInferResponse;
  try {
    res = await deps.engine.infer(buildRequest(fn, id, inputs, requested, staged), fn.name, timeoutMs, traceparent);
  } catch (e) {
    // A staged call can fail because the engine lost our regions (it restarted): re-register, retry inline once.
    // Only then: any other failure (a corrupt image) would do the work twice and send the body over gRPC.
    const used = [...inputs.map((t) => t.at?.region), ...[...at.values()].map((p) => p.slice.region)];
    const retry = staged && deps.arena && mayBeRegionLost(e) && retryInline(used, await deps.arena.verifyRegistration().catch(() => [])); // cannot re-register: no retry, the call's own error is thrown
    if (!retry) throw e;
    trace(`staged call failed (${e.message}); regions re-registered, retrying inline`, id);
    staged = false;
    slices.transfer = 'inline';
    ({ requested, at } = placeOutputs(fn, specs, inputs, false, slices));
    res = await deps.engine.infer(buildRequest(fn, id, inputs, requested, false), fn.name, timeoutMs, traceparent);
  }
  const outputs = collectOutputs(res, specs, at);
  if (deps.metrics) {
    let out = 0;
    for (const o of outputs) out += o.bytes.byteLength;
    deps.metrics.payloadBytes(staged, total, out);
  }
  return { outputs, transfer: staged ? 'shm' : 'inline' };
}

/** Handle one HTTP call; records the function and payload transfer in c.var for the app's middleware. */
export async function invoke(c: Context<GatewayEnv>, deps: InvokeDeps, name: string): Promise<Response> {
  const fn = await deps.registry.resolve(name);
  c.set('fn', fn.name);
  checkApiKey(fn.definition, (h) => c.req.header(h));
  const given = c.req.header('x-request-id');
  const id = given ?? crypto.randomUUID();
  c.header('X-Request-Id', id);
  if (deps.plans) await deps.plans.admit((h) => c.req.header(h), given);
  const slices = new CallSlices(deps.arena);
  const span = deps.tracing?.startCall(fn.name, id, c.req.header('traceparent'));
  let status = 500;
  try {
    const { inputs, outputs: wanted } = await readInputs(c, fn, deps, slices);
    const { specs, binary } = callOutputs(fn, wanted, c);
    const meta = { pin: c.req.header('x-deploy-side'), clientId: given !== undefined };
    const { outputs, transfer, side } = await runFunction(deps, fn, inputs, specs, id, slices, span?.traceparent, meta);
    status = 200;
    c.set('transfer', transfer);
    if (side) c.header('X-Deploy-Side', side);
    if (binary) {
      const o = outputs.find((x) => x.spec.tensor === binary.tensor);
      if (!o) throw gatewayError('ENGINE_ERROR', { name: fn.name });
      c.header('X-Output-Name', o.spec.name);
      c.header('X-Output-Datatype', o.datatype);
      c.header('X-Output-Shape', o.shape.join(','));
      return c.body(Buffer.from(o.bytes), 200, { 'Content-Type': 'application/octet-stream' });
    }
    return c.body(replyJsonText(fn, outputs), 200, { 'Content-Type': 'application/json' });
  } catch (e) {
    status = e instanceof GatewayError ? e.status : 500;
    c.set('transfer', slices.transfer); // a staged call the engine refused was still staged
    throw e;
  } finally {
    span?.end(status);
    slices.releaseAll();
  }
}
