// KServe v2 REST inference request/response <-> the engine's InferRequest /
// InferResponse, including the binary tensor data and shared-memory
// parameters. Pure functions; handlers in routes-infer.ts do the I/O.
import { byteSizeOf, isDatatype } from '../../api/datatypes.ts';
import type { InferInput, InferRequest, InferResponse, ParamValue, RequestedOutput } from '../../api/infer-request.ts';
import { checkReservedParams, parseSchedulingParams, parseShmParams } from '../../api/request-parameters.ts';
import { invalidArg } from '../../api/status.ts';
import { assembleBody, BinaryInputReader, splitBody } from './binary-extension.ts';
import { mayHaveLostIntegers, parseExactJson } from './exact-json.ts';
import { rapidJsonError } from './json-parse-error.ts';
import { jsonToTensorBytes, tensorBytesToJson } from './tensor-json.ts';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Parse JSON text, turning syntax errors into INVALID_ARG naming the problem.
 * `exact`: integer literals past 2^53 come back as bigint (exact-json.ts).
 */
export function parseJson(text: Buffer | string, what = 'request body', exact = false): unknown {
  const t = typeof text === 'string' ? text : text.toString('utf8');
  try {
    return exact ? parseExactJson(t) : JSON.parse(t);
  } catch (e) {
    // Triton's words and rapidjson's offset (clients match on them); ours when rapidjson would have read it.
    const why = rapidJsonError(typeof text === 'string' ? Buffer.from(text) : text);
    if (why) throw invalidArg(`failed to parse the request JSON buffer: ${why.message} at ${why.offset}`);
    throw invalidArg(`failed to parse the ${what} as JSON: ${(e as Error).message}`);
  }
}

/** A `parameters` object: string, number (bigint past 2^53) or boolean values only. */
export function parseParameters(v: unknown, where: string): Record<string, ParamValue> {
  if (v === undefined || v === null) return {};
  if (!isObject(v)) throw invalidArg(`'parameters' of ${where} must be a JSON object`);
  const out: Record<string, ParamValue> = {};
  for (const [k, x] of Object.entries(v)) {
    if (typeof x !== 'string' && typeof x !== 'number' && typeof x !== 'boolean' && typeof x !== 'bigint') {
      throw invalidArg(`parameter '${k}' of ${where} must be a string, number or boolean`);
    }
    out[k] = x;
  }
  return out;
}

/** What the HTTP layer needs besides the engine request. */
export interface ParsedInfer {
  request: InferRequest;
  /** Request-level `binary_data_output`: default for outputs without `binary_data`. */
  binaryOutputDefault: boolean;
}

function parseShape(v: unknown, tensor: string): number[] {
  if (!Array.isArray(v) || !v.every((d) => Number.isSafeInteger(d) && (d as number) >= 0)) {
    throw invalidArg(`'shape' of input '${tensor}' must be an array of non-negative integers`);
  }
  return v as number[];
}

function parseInput(v: unknown, index: number, reader: BinaryInputReader): InferInput {
  if (!isObject(v)) throw invalidArg(`input ${index} of the request must be a JSON object`);
  const name = v.name;
  if (typeof name !== 'string' || name === '') throw invalidArg(`input ${index} of the request has no 'name'`);
  const datatype = v.datatype;
  if (typeof datatype !== 'string' || !isDatatype(datatype)) {
    throw invalidArg(`input '${name}' has unknown datatype '${String(datatype)}'`);
  }
  const shape = parseShape(v.shape, name);
  const params = parseParameters(v.parameters, `input '${name}'`);
  const shm = parseShmParams(params, name, 'input');
  const binarySize = params.binary_data_size;
  delete params.binary_data_size;
  if (shm) {
    if (binarySize !== undefined || v.data !== undefined) {
      throw invalidArg(`input '${name}' has shared memory parameters and also carries data`);
    }
    return { name, datatype, shape, data: new Uint8Array(0), shm };
  }
  if (binarySize !== undefined) {
    if (v.data !== undefined) throw invalidArg(`input '${name}' has both 'binary_data_size' and 'data'`);
    const data = reader.take(name, Number(binarySize));
    const expected = byteSizeOf(datatype, shape);
    if (expected >= 0 && expected !== data.byteLength) {
      throw invalidArg(
        `input '${name}' has binary_data_size ${data.byteLength} but shape [${shape.join(',')}] of ${datatype} needs ${expected} bytes`,
      );
    }
    return { name, datatype, shape, data };
  }
  if (v.data === undefined) throw invalidArg(`input '${name}' has no 'data', 'binary_data_size' or shared memory parameters`);
  return { name, datatype, shape, data: jsonToTensorBytes(name, datatype, shape, v.data) };
}

function parseOutput(v: unknown, index: number): RequestedOutput {
  if (!isObject(v)) throw invalidArg(`output ${index} of the request must be a JSON object`);
  const name = v.name;
  if (typeof name !== 'string' || name === '') throw invalidArg(`output ${index} of the request has no 'name'`);
  const params = parseParameters(v.parameters, `output '${name}'`);
  const out: RequestedOutput = { name };
  const shm = parseShmParams(params, name, 'output');
  if (shm) out.shm = shm;
  if (params.binary_data !== undefined) {
    if (typeof params.binary_data !== 'boolean') throw invalidArg(`'binary_data' of output '${name}' must be a boolean`);
    out.binary = params.binary_data;
  }
  if (params.classification !== undefined) {
    const n = Number(params.classification);
    if (!Number.isSafeInteger(n) || n < 1) throw invalidArg(`'classification' of output '${name}' must be a positive integer`);
    out.classification = n;
  }
  return out;
}

/**
 * Build the engine request from a body (JSON, or JSON header + binary tail
 * when `headerLength` is given).
 */
export function parseInferRequest(
  body: Buffer,
  headerLength: string | undefined,
  modelName: string,
  modelVersion: string | undefined,
): ParsedInfer {
  if (headerLength !== undefined && headerLength.trim() === '0') return rawRequest(body, modelName, modelVersion);
  const { json, binary } = splitBody(body, headerLength);
  let doc = parseJson(json, 'inference request header');
  if (lostIntegers(doc)) doc = parseJson(json, 'inference request header', true);
  if (!isObject(doc)) throw invalidArg('the inference request must be a JSON object');
  if (doc.id !== undefined && typeof doc.id !== 'string') throw invalidArg(`request 'id' must be a string`);
  if (!Array.isArray(doc.inputs)) throw invalidArg(`the inference request needs an 'inputs' array`);
  if (doc.outputs !== undefined && !Array.isArray(doc.outputs)) throw invalidArg(`'outputs' must be an array`);
  const parameters = parseParameters(doc.parameters, 'the request');
  const binaryOutput = parameters.binary_data_output;
  if (binaryOutput !== undefined && typeof binaryOutput !== 'boolean') {
    throw invalidArg(`request parameter 'binary_data_output' must be a boolean`);
  }
  delete parameters.binary_data_output;
  checkReservedParams(parameters, 'http');
  const { priority, timeoutUs } = parseSchedulingParams(parameters);
  delete parameters.priority;
  delete parameters.timeout;

  const reader = new BinaryInputReader(binary);
  const inputs = doc.inputs.map((x, i) => parseInput(x, i, reader));
  reader.finish();
  const outputs = (doc.outputs ?? []).map((x: unknown, i: number) => parseOutput(x, i));
  const request: InferRequest = { modelName, inputs, outputs, parameters };
  if (modelVersion !== undefined && modelVersion !== '') request.modelVersion = modelVersion;
  if (doc.id !== undefined) request.id = doc.id as string;
  if (priority !== undefined) request.priority = priority;
  if (timeoutUs !== undefined) request.timeoutUs = timeoutUs;
  return { request, binaryOutputDefault: binaryOutput === true };
}

/**
 * Triton's raw binary request (Inference-Header-Content-Length: 0): the body
 * is the model's one input, named, typed and shaped by the engine from the
 * model's config; every output comes back binary.
 */
function rawRequest(body: Buffer, modelName: string, modelVersion: string | undefined): ParsedInfer {
  const request: InferRequest = {
    modelName,
    inputs: [{ name: 'raw_input', datatype: 'UINT8', shape: [body.length], data: body }],
    outputs: [],
    parameters: {},
    rawInput: true,
  };
  if (modelVersion !== undefined && modelVersion !== '') request.modelVersion = modelVersion;
  return { request, binaryOutputDefault: true };
}

/**
 * Whether an integer that must stay exact came out of JSON.parse past 2^53:
 * INT64/UINT64 `data`, or a parameter (sequence_id, shm offsets). Then the
 * body is read again with exact integers; FP32 and the other bodies never are.
 */
function lostIntegers(doc: unknown): boolean {
  // Plain loops, no closures or copies: this runs on every JSON request (~0.1 µs for a small one).
  if (!isObject(doc)) return false;
  if (paramsLost(doc.parameters)) return true;
  for (const list of [doc.inputs, doc.outputs]) {
    if (!Array.isArray(list)) continue;
    for (let i = 0; i < list.length; i++) {
      const t: unknown = list[i];
      if (!isObject(t)) continue;
      if (paramsLost(t.parameters)) return true;
      if ((t.datatype === 'INT64' || t.datatype === 'UINT64') && mayHaveLostIntegers(t.data)) return true;
    }
  }
  return false;
}

/** Whether a `parameters` object holds a number past 2^53 (its values are scalars). */
function paramsLost(p: unknown): boolean {
  if (typeof p !== 'object' || p === null) return false;
  const o = p as Record<string, unknown>;
  for (const k in o) {
    const v = o[k];
    if (typeof v === 'number' && (v > Number.MAX_SAFE_INTEGER || v < -Number.MAX_SAFE_INTEGER)) return true;
  }
  return false;
}

const str = (s: string) => JSON.stringify(s);

/**
 * Encode the engine's response as Triton's HTTP server writes it
 * (http_server.cc, FinalizeResponse): every output has name, datatype and
 * shape; a JSON output adds `data`, a binary one `parameters` with only
 * `binary_data_size`, an output written into a shared-memory region nothing
 * more. Triton's C++ client reads any output `parameters` as binary-data
 * information, so no other parameters may appear there. A binary output of
 * zero bytes adds nothing to the tail; with no bytes in the tail the reply is
 * plain JSON, without Inference-Header-Content-Length, as Triton's.
 */
export function encodeInferResponse(
  resp: InferResponse,
  requested: readonly RequestedOutput[],
  binaryOutputDefault: boolean,
): { body: Buffer; headerLength?: number } {
  const byName = new Map(requested.map((r) => [r.name, r]));
  const binaries: Uint8Array[] = [];
  const outs = resp.outputs.map((o) => {
    const req = byName.get(o.name);
    let rest = '';
    if (o.shm) {
      // The bytes are in the client's region already: name, datatype and shape say all.
    } else if (req?.binary ?? binaryOutputDefault) {
      rest = `,"parameters":{"binary_data_size":${o.data.byteLength}}`;
      if (o.data.byteLength > 0) binaries.push(o.data);
    } else {
      rest = `,"data":${tensorBytesToJson(o.name, o.datatype, o.data)}`;
    }
    return `{"name":${str(o.name)},"datatype":${str(o.datatype)},"shape":[${o.shape.join(',')}]${rest}}`;
  });
  const id = resp.id !== undefined && resp.id !== '' ? `,"id":${str(resp.id)}` : '';
  const rp = resp.parameters && Object.keys(resp.parameters).length ? `,"parameters":${stringifyParams(resp.parameters)}` : '';
  const json = `{"model_name":${str(resp.modelName)},"model_version":${str(resp.modelVersion)}${id}${rp},"outputs":[${outs.join(',')}]}`;
  return assembleBody(json, binaries);
}

function stringifyParams(p: Record<string, ParamValue>): string {
  return JSON.stringify(p, (_k, v: unknown) => (typeof v === 'bigint' ? Number(v) : v));
}
