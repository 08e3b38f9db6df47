// ModelInferRequest/Response <-> the engine's InferRequest/InferResponse:
// raw_input_contents and typed `contents` (never mixed), every datatype,
// shm parameters, requested outputs. Raw bytes stay views of the received
// message (no copy).
import type { InferInput, InferRequest, InferResponse, ParamValue, RequestedOutput } from '../../api/infer-request.ts';
import { isDatatype, serializeBytes, type Datatype, numberToFp16 } from '../../api/datatypes.ts';
import { checkReservedParams, parseSchedulingParams, parseShmParams } from '../../api/request-parameters.ts';
import { invalidArg } from '../../api/status.ts';
import type {
  InferInputTensor,
  InferOutputTensor,
  InferParameter,
  InferParameterChoice,
  InferRequestedOutputTensor,
  InferTensorContents,
  ModelInferRequest,
  ModelInferResponse,
  Parameters,
} from '../../../protocol/kserve-messages.ts';

/** The oneof's fields, in the order a value without parameter_choice is looked for. */
const PARAM_FIELDS: readonly InferParameterChoice[] = ['string_param', 'int64_param', 'bool_param', 'double_param', 'uint64_param'];

/** InferParameter (oneof) -> JS value. A decoded one names its field; a plain object is read by which field it has. */
function paramValue(p: InferParameter): ParamValue {
  switch (p.parameter_choice) {
    case 'bool_param':
      return p.bool_param!;
    // A number, or a bigint when past 2^53 (protocol/exact-int64.ts): uint64 correlation IDs stay exact.
    case 'int64_param':
      return p.int64_param!;
    case 'uint64_param':
      return p.uint64_param!;
    case 'double_param':
      return p.double_param!;
    case 'string_param':
      return p.string_param!;
    default: {
      for (const k of PARAM_FIELDS) {
        if (Object.prototype.hasOwnProperty.call(p, k)) return p[k]!;
      }
      return '';
    }
  }
}

function paramsOf(map: Parameters | undefined): Record<string, ParamValue> {
  const out: Record<string, ParamValue> = {};
  for (const [k, v] of Object.entries(map ?? {})) out[k] = paramValue(v);
  return out;
}

/** JS value -> InferParameter. */
function toParam(v: ParamValue): InferParameter {
  if (typeof v === 'boolean') return { bool_param: v };
  if (typeof v === 'string') return { string_param: v };
  if (typeof v === 'bigint') return v >= 2n ** 63n ? { uint64_param: v } : { int64_param: v };
  return Number.isInteger(v) ? { int64_param: v } : { double_param: v };
}

function typedContents(dt: Datatype, c: InferTensorContents, name: string): Uint8Array {
  const pick = <K extends keyof InferTensorContents>(field: K): NonNullable<InferTensorContents[K]> => c[field] ?? [];
  const pack = <T extends ArrayBufferView>(arr: T) => new Uint8Array(arr.buffer, arr.byteOffset, arr.byteLength);
  switch (dt) {
    case 'BOOL':
      return Uint8Array.from(pick('bool_contents'), (b) => (b ? 1 : 0));
    case 'INT8':
      return pack(Int8Array.from(pick('int_contents')));
    case 'INT16':
      return pack(Int16Array.from(pick('int_contents')));
    case 'INT32':
      return pack(Int32Array.from(pick('int_contents')));
    case 'INT64':
      return pack(BigInt64Array.from(pick('int64_contents'), (x) => BigInt(x)));
    case 'UINT8':
      return Uint8Array.from(pick('uint_contents'));
    case 'UINT16':
      return pack(Uint16Array.from(pick('uint_contents')));
    case 'UINT32':
      return pack(Uint32Array.from(pick('uint_contents')));
    case 'UINT64':
      return pack(BigUint64Array.from(pick('uint64_contents'), (x) => BigInt(x)));
    case 'FP32':
      return pack(Float32Array.from(pick('fp32_contents')));
    case 'FP64':
      return pack(Float64Array.from(pick('fp64_contents')));
    case 'BYTES':
      return serializeBytes(pick('bytes_contents'));
    case 'FP16': {
      if (pick('fp32_contents').length) return pack(Uint16Array.from(pick('fp32_contents'), numberToFp16));
      return new Uint8Array(0);
    }
    default:
      throw invalidArg(`input '${name}': datatype ${dt} cannot be sent in typed 'contents'; use raw_input_contents`);
  }
}

/** Decode a ModelInferRequest into an engine request. */
export function toInferRequest(m: ModelInferRequest): InferRequest {
  const raw: Uint8Array[] = m.raw_input_contents ?? [];
  const inputsMsg: InferInputTensor[] = m.inputs ?? [];
  if (raw.length) {
    for (const i of inputsMsg) {
      if (i.contents) {
        throw invalidArg(`contents field must not be specified when using raw_input_contents for '${i.name}' for model '${m.model_name}'`);
      }
    }
  }
  let rawIdx = 0;
  const inputs: InferInput[] = inputsMsg.map((i) => {
    const name: string = i.name;
    if (!isDatatype(i.datatype)) throw invalidArg(`invalid datatype '${i.datatype}' for input '${name}'`);
    const shape = (i.shape ?? []).map(Number);
    const shm = parseShmParams(paramsOf(i.parameters), name, 'input');
    if (shm) return { name, datatype: i.datatype, shape, data: new Uint8Array(0), shm };
    let data: Uint8Array;
    if (raw.length) {
      if (rawIdx >= raw.length) {
        throw invalidArg(`expected raw_input_contents for input '${name}' for model '${m.model_name}', but only ${raw.length} were given`);
      }
      data = raw[rawIdx++]!;
    } else if (i.contents) data = typedContents(i.datatype, i.contents, name);
    else throw invalidArg(`input '${name}' for model '${m.model_name}' has no data (contents, raw_input_contents or shared memory)`);
    return { name, datatype: i.datatype, shape, data };
  });
  if (raw.length && rawIdx !== raw.length) {
    throw invalidArg(`${raw.length} raw_input_contents given for ${rawIdx} input(s) that take raw data, model '${m.model_name}'`);
  }
  const outputs: RequestedOutput[] = (m.outputs ?? []).map((o: InferRequestedOutputTensor) => {
    const p = paramsOf(o.parameters);
    const shm = parseShmParams(p, o.name, 'output');
    const out: RequestedOutput = shm ? { name: o.name, shm } : { name: o.name };
    if (p.classification !== undefined) {
      const k = Number(p.classification);
      if (!Number.isSafeInteger(k) || k < 1) throw invalidArg(`'classification' of output '${o.name}' must be a positive integer`);
      out.classification = k;
    }
    return out;
  });
  const parameters = paramsOf(m.parameters);
  checkReservedParams(parameters, 'grpc');
  // A stream setting read by ModelStreamInfer from the message, not a request parameter the model sees (Triton's state parameter).
  delete parameters.triton_enable_empty_final_response;
  const sid = m.parameters?.sequence_id;
  if (sid) {
    // Triton's type check: a correlation ID is an integer or a string parameter.
    if (sid.parameter_choice === 'double_param' || sid.parameter_choice === 'bool_param') {
      throw invalidArg(`invalid value type for 'sequence_id' parameter, expected int64_param, uint64_param or string_param.`);
    }
  }
  return {
    modelName: m.model_name,
    modelVersion: m.model_version || undefined,
    id: m.id || undefined,
    inputs,
    outputs,
    parameters,
    ...parseSchedulingParams(parameters),
  };
}

/** Encode an engine response as a ModelInferResponse (bytes in raw_output_contents). */
export function toInferResponse(r: InferResponse): ModelInferResponse<Uint8Array> {
  const outputs: InferOutputTensor[] = [];
  const raw: Uint8Array[] = [];
  for (const o of r.outputs) {
    const t: InferOutputTensor = { name: o.name, datatype: o.datatype, shape: o.shape };
    if (o.shm) {
      t.parameters = {
        shared_memory_region: { string_param: o.shm.region },
        shared_memory_offset: { int64_param: o.shm.offset },
        shared_memory_byte_size: { int64_param: o.shm.byteSize },
      };
    }
    // One raw entry per output (empty for shm ones) keeps clients' indexing aligned.
    raw.push(o.shm ? new Uint8Array(0) : o.data);
    outputs.push(t);
  }
  const res: ModelInferResponse<Uint8Array> = { model_name: r.modelName, model_version: r.modelVersion, outputs, raw_output_contents: raw };
  if (r.id) res.id = r.id;
  if (r.parameters) res.parameters = Object.fromEntries(Object.entries(r.parameters).map(([k, v]) => [k, toParam(v)]));
  return res;
}
