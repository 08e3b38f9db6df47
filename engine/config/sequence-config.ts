// The sequence batcher's view of a model config and a request (Triton's
// sequence_batching): the strategy and its settings, the control inputs
// with their false/true values, the implicit states; the correlation ID and
// START/END flags a request carries; and the control/state tensors given to
// the model. Pure functions, no I/O, no timers.
import type { InferInput, InferRequest, ParamValue, Tensor } from '../api/infer-request.ts';
import type { ModelConfig } from '../api/model-config.ts';
import { byteSizeOf, fromConfigType, type Datatype } from '../api/datatypes.ts';
import { invalidArg } from '../api/status.ts';
import type { CorrelationId } from '../api/request-parameters.ts';

export type ControlKind = 'CONTROL_SEQUENCE_START' | 'CONTROL_SEQUENCE_END' | 'CONTROL_SEQUENCE_READY' | 'CONTROL_SEQUENCE_CORRID';

/** One control tensor the model takes: its input name, kind, datatype and [false, true] values. */
export interface ControlSpec {
  name: string;
  kind: ControlKind;
  datatype: Datatype;
  falseTrue: [number | boolean, number | boolean];
}

/** One implicit state: the output carried into the next request of the sequence as an input. */
export interface StateSpec {
  inputName: string;
  outputName: string;
  datatype: Datatype;
  dims: number[];
  /** Initial value's bytes (zero_data), or undefined for zeros. */
  initial?: Uint8Array;
}

export interface SequenceSpec {
  strategy: 'direct' | 'oldest';
  maxIdleNs: bigint;
  maxQueueDelayNs: bigint;
  /** direct: minimum_slot_utilization (with maxQueueDelayNs, how full a batch waits to be). */
  minSlotUtilization: number;
  /** oldest: sequences batched at once (others wait in the backlog). */
  maxCandidates: number;
  preferredSizes: number[];
  controls: ControlSpec[];
  states: StateSpec[];
}

/** Triton's default max_sequence_idle_microseconds (1 s). */
export const DEFAULT_MAX_SEQUENCE_IDLE_US = 1_000_000;

type RawSeq = {
  max_sequence_idle_microseconds?: number;
  direct?: { max_queue_delay_microseconds?: number; minimum_slot_utilization?: number };
  oldest?: { max_candidate_sequences?: number; preferred_batch_size?: number[]; max_queue_delay_microseconds?: number };
  control_input?: Array<{
    name: string;
    control?: Array<{
      kind?: string;
      int32_false_true?: number[];
      fp32_false_true?: number[];
      bool_false_true?: boolean[];
      data_type?: string;
    }>;
  }>;
  state?: Array<{
    input_name: string;
    output_name: string;
    data_type: string;
    dims?: number[];
    initial_state?: Array<{ zero_data?: boolean; data_file?: string }>;
  }>;
};

/** Input names the engine supplies itself (control inputs and state inputs): never in `input`, never asked of clients. */
export function engineSuppliedInputs(config: ModelConfig): Set<string> {
  const sb = config.sequence_batching as RawSeq | undefined;
  return new Set([...(sb?.control_input ?? []).map((c) => c.name), ...(sb?.state ?? []).map((s) => s.input_name)]);
}

/** Output names the engine keeps for itself (state outputs). */
export function stateOutputs(config: ModelConfig): string[] {
  return ((config.sequence_batching as RawSeq | undefined)?.state ?? []).map((s) => s.output_name);
}

/** Where Triton looks for an implicit state's initial_state data_file: this folder under the model's. */
export const INITIAL_STATE_DIR = 'initial_state';

/**
 * The initial_state data_files a config names, relative to the model's
 * initial_state/ folder (the caller reads them; this module does no I/O).
 */
export function initialStateFiles(config: ModelConfig): string[] {
  const sb = (config.sequence_batching ?? {}) as RawSeq;
  return (sb.state ?? []).map((s) => s.initial_state?.[0]?.data_file).filter((f): f is string => typeof f === 'string' && f.length > 0);
}

/**
 * The normalized sequence settings of a config with sequence_batching; errors
 * name the field path. `initialData` holds the bytes of each initial_state
 * data_file (initialStateFiles) once read; without it (load-time validation)
 * only the file's name is checked.
 */
export function sequenceSpecOf(
  config: ModelConfig,
  file = `${config.name}/config.pbtxt`,
  initialData?: ReadonlyMap<string, Uint8Array>,
): SequenceSpec {
  const sb = (config.sequence_batching ?? {}) as RawSeq;
  const fail = (p: string, what: string) => invalidArg(`${file}: sequence_batching.${p}: ${what}`);
  const controls: ControlSpec[] = [];
  (sb.control_input ?? []).forEach((ci, i) => {
    if (!ci.name) throw fail(`control_input[${i}].name`, 'must be set');
    const list = ci.control ?? [];
    if (list.length !== 1) throw fail(`control_input[${i}].control`, `expected exactly one control for '${ci.name}', got ${list.length}`);
    const c = list[0]!;
    const kind = (c.kind ?? 'CONTROL_SEQUENCE_START') as ControlKind;
    const where = `control_input[${i}].control[0]`;
    if (kind === 'CONTROL_SEQUENCE_CORRID') {
      if (!c.data_type) throw fail(`${where}.data_type`, `CONTROL_SEQUENCE_CORRID needs a data_type`);
      const dt = fromConfigType(c.data_type);
      if (!['UINT64', 'INT64', 'UINT32', 'INT32', 'BYTES'].includes(dt)) {
        throw fail(`${where}.data_type`, `expected TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 or TYPE_STRING, got ${c.data_type}`);
      }
      controls.push({ name: ci.name, kind, datatype: dt, falseTrue: [0, 0] });
      return;
    }
    const pairs: Array<[Datatype, Array<number | boolean> | undefined]> = [
      ['INT32', c.int32_false_true],
      ['FP32', c.fp32_false_true],
      ['BOOL', c.bool_false_true],
    ];
    const given = pairs.filter(([, v]) => v && v.length);
    if (given.length !== 1 || given[0]![1]!.length !== 2) {
      throw fail(where, `'${ci.name}' needs exactly one of int32_false_true, fp32_false_true, bool_false_true with two values`);
    }
    const [dt, v] = given[0]!;
    controls.push({ name: ci.name, kind, datatype: dt, falseTrue: [v![0]!, v![1]!] });
  });
  const states: StateSpec[] = (sb.state ?? []).map((s, i) => {
    if (!s.input_name || !s.output_name) throw fail(`state[${i}]`, 'needs input_name and output_name');
    const datatype = fromConfigType(s.data_type);
    const dims = (s.dims ?? []).map(Number);
    if (dims.some((d) => d < 0)) throw fail(`state[${i}].dims`, `variable dims are not supported for implicit state, got [${dims}]`);
    const init = s.initial_state?.[0];
    const spec: StateSpec = { inputName: s.input_name, outputName: s.output_name, datatype, dims };
    if (init?.data_file) {
      const at = `state[${i}].initial_state[0].data_file`;
      const f = init.data_file;
      // Inside the model's initial_state/ folder, as Triton looks for it: no absolute path, no '..'.
      if (f.startsWith('/') || f.split(/[\\/]/).includes('..'))
        throw fail(at, `'${f}' must be a path inside the model's ${INITIAL_STATE_DIR}/ folder`);
      const bytes = initialData?.get(f);
      if (initialData && !bytes) throw fail(at, `cannot read '${INITIAL_STATE_DIR}/${f}'`);
      if (bytes && datatype !== 'BYTES' && bytes.byteLength !== byteSizeOf(datatype, dims)) {
        throw fail(
          at,
          `'${INITIAL_STATE_DIR}/${f}' holds ${bytes.byteLength} bytes; state '${s.input_name}' (${s.data_type} [${dims}]) needs ${byteSizeOf(datatype, dims)}`,
        );
      }
      if (bytes) spec.initial = bytes;
    }
    return spec;
  });
  const oldest = sb.oldest;
  const us = (v: number | undefined) => BigInt(Math.round(Number(v ?? 0))) * 1000n;
  return {
    strategy: oldest ? 'oldest' : 'direct',
    maxIdleNs: us(sb.max_sequence_idle_microseconds || DEFAULT_MAX_SEQUENCE_IDLE_US),
    maxQueueDelayNs: us(oldest ? oldest.max_queue_delay_microseconds : sb.direct?.max_queue_delay_microseconds),
    minSlotUtilization: oldest ? 0 : Number(sb.direct?.minimum_slot_utilization ?? 0),
    maxCandidates: Math.max(1, Number(oldest?.max_candidate_sequences ?? 0) || Math.max(1, config.max_batch_size)),
    preferredSizes: (oldest?.preferred_batch_size ?? []).map(Number),
    controls,
    states,
  };
}

/** A request's correlation ID and flags (sequence_id: uint64 or string; 0 / '' = none). */
export interface SequenceFlags {
  id: CorrelationId | undefined;
  start: boolean;
  end: boolean;
}

const flag = (v: ParamValue | undefined) => v === true || v === 'true' || v === 1 || v === 1n;

/** Read sequence_id / sequence_start / sequence_end from the request parameters. */
export function sequenceFlagsOf(params: Record<string, ParamValue>): SequenceFlags {
  const raw = params.sequence_id;
  let id: CorrelationId | undefined;
  if (typeof raw === 'string') id = raw === '' ? undefined : raw;
  else if (typeof raw === 'bigint' || typeof raw === 'number') {
    // Frontends hand a value past 2^53 over as a bigint (exact-json.ts, protocol/exact-int64.ts); a number is exact.
    if (typeof raw === 'number' && !Number.isSafeInteger(raw)) {
      throw invalidArg(`request parameter 'sequence_id' must be an unsigned 64-bit integer or a string, got ${raw} (not exact)`);
    }
    const n = BigInt(raw);
    if (n < 0n || n >= 2n ** 64n)
      throw invalidArg(`request parameter 'sequence_id' must be an unsigned 64-bit integer or a string, got ${raw}`);
    id = n === 0n ? undefined : n;
  } else if (raw !== undefined) {
    throw invalidArg(`request parameter 'sequence_id' must be an unsigned 64-bit integer or a string, got ${typeof raw} ${String(raw)}`);
  }
  return { id, start: flag(params.sequence_start), end: flag(params.sequence_end) };
}

/** The map key of a correlation ID, exact: 7 and '7' are different sequences, as in Triton. */
export const sequenceKey = (id: CorrelationId): string => (typeof id === 'string' ? `s:${id}` : `n:${id}`);

/** A 32-bit control's value: a bigint ID keeps its low 32 bits exactly (a C cast), never a rounded double's. */
const low32 = (v: number | bigint | boolean | string): number => (typeof v === 'bigint' ? Number(BigInt.asUintN(32, v)) : Number(v));

function scalarBytes(datatype: Datatype, value: number | bigint | boolean | string, rows: number): Uint8Array {
  const n = Math.max(1, rows);
  switch (datatype) {
    case 'FP32':
      return new Uint8Array(Float32Array.from({ length: n }, () => Number(value)).buffer);
    case 'INT32':
      return new Uint8Array(Int32Array.from({ length: n }, () => low32(value)).buffer);
    case 'UINT32':
      return new Uint8Array(Uint32Array.from({ length: n }, () => low32(value)).buffer);
    case 'BOOL':
      return Uint8Array.from({ length: n }, () => (value === true || value === 1 || value === 1n ? 1 : 0));
    // BigInt64Array stores a uint64 ID past 2^63 as its two's complement, as a C cast would.
    case 'INT64':
      return new Uint8Array(BigInt64Array.from({ length: n }, () => BigInt.asIntN(64, BigInt(value))).buffer);
    case 'UINT64':
      return new Uint8Array(BigUint64Array.from({ length: n }, () => BigInt(value)).buffer);
    case 'BYTES': {
      const s = Buffer.from(String(value));
      const out = new Uint8Array(n * (4 + s.length));
      for (let i = 0; i < n; i++) {
        new DataView(out.buffer).setUint32(i * (4 + s.length), s.length, true);
        out.set(s, i * (4 + s.length) + 4);
      }
      return out;
    }
    default:
      throw invalidArg(`control datatype ${datatype} is not supported`);
  }
}

/**
 * The control tensors for one request: shape [1] per batch row ([batch, 1]
 * when the model batches). READY is true for a request that runs, false for
 * the null request that pads an idle batch slot (direct strategy).
 */
export function controlTensors(
  spec: SequenceSpec,
  flags: { id: CorrelationId; start: boolean; end: boolean },
  batched: boolean,
  ready = true,
): InferInput[] {
  return spec.controls.map((c) => {
    let value: number | bigint | boolean | string;
    if (c.kind === 'CONTROL_SEQUENCE_CORRID') {
      if (c.datatype === 'BYTES') value = String(flags.id);
      else if (typeof flags.id === 'string')
        throw invalidArg(`sequence_id '${flags.id}' is a string but the model's CONTROL_SEQUENCE_CORRID '${c.name}' is ${c.datatype}`);
      else value = flags.id;
    } else {
      const on = c.kind === 'CONTROL_SEQUENCE_START' ? flags.start : c.kind === 'CONTROL_SEQUENCE_END' ? flags.end : ready;
      value = c.falseTrue[on ? 1 : 0];
    }
    return { name: c.name, datatype: c.datatype, shape: batched ? [1, 1] : [1], data: scalarBytes(c.datatype, value, 1) };
  });
}

/** A state's initial tensor (its data_file's bytes, else zeros), batch dim first when the model batches. */
export function initialState(s: StateSpec, batched: boolean): Tensor {
  const shape = batched ? [1, ...s.dims] : [...s.dims];
  const size = byteSizeOf(s.datatype, shape);
  return { name: s.inputName, datatype: s.datatype, shape, data: s.initial ?? new Uint8Array(Math.max(0, size)) };
}

/** The request given to the model: controls and states added, state outputs asked for. */
export function withSequenceInputs(
  req: InferRequest,
  spec: SequenceSpec,
  flags: { id: CorrelationId; start: boolean; end: boolean },
  state: Map<string, Tensor> | undefined,
  batched: boolean,
  allOutputs: string[],
  ready = true,
): InferRequest {
  const inputs: InferInput[] = [...req.inputs, ...controlTensors(spec, flags, batched, ready)];
  for (const s of spec.states) {
    const prev = flags.start ? undefined : state?.get(s.outputName);
    const t = prev ?? initialState(s, batched);
    inputs.push({ name: s.inputName, datatype: t.datatype, shape: t.shape, data: t.data });
  }
  const outputs = spec.states.length
    ? [...(req.outputs.length ? req.outputs : allOutputs.map((name) => ({ name }))), ...spec.states.map((s) => ({ name: s.outputName }))]
    : req.outputs;
  return { ...req, inputs, outputs };
}
