// The response cache's key and value formats. The key is a SHA-256 over what
// makes two requests answer alike (Triton's hash of model name, version and
// inputs; plus the loaded version's identity, the request parameters a model
// can read, and the outputs asked for); the value is one self-describing byte
// string of the response's tensors, so a local LRU and Redis store the same.
import { createHash } from 'node:crypto';
import type { InferRequest, Tensor } from '../api/infer-request.ts';
import { isDatatype } from '../api/datatypes.ts';

/**
 * Request parameters that only say how the engine schedules or returns a
 * request: never part of a model's answer, so never part of the key.
 */
export const SCHEDULING_PARAMETERS: ReadonlySet<string> = new Set([
  'priority',
  'timeout',
  'sequence_id',
  'sequence_start',
  'sequence_end',
  'binary_data_output',
  'triton_enable_empty_final_response',
]);

/**
 * Hex SHA-256 of model, version, the version's identity (cache-identity.ts:
 * its files and config), inputs (by name: datatype, shape, bytes), the
 * request parameters other than the scheduling ones (a model.py or JS model
 * reads them) and the outputs the response holds (`outputNames`: the
 * requested ones, or all the model's when none are named, so both spellings
 * share one entry).
 */
export function cacheKey(model: string, version: number, identity: string, req: InferRequest, outputNames: readonly string[]): string {
  const h = createHash('sha256');
  const field = (s: string) => h.update(`${s.length}:${s};`);
  field(model);
  field(String(version));
  field(identity);
  for (const t of [...req.inputs].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    field(t.name);
    field(t.datatype);
    field(t.shape.join(','));
    field(String(t.data.byteLength));
    h.update(t.data);
  }
  field('parameters');
  for (const k of Object.keys(req.parameters)
    .filter((k) => !SCHEDULING_PARAMETERS.has(k))
    .sort()) {
    const v = req.parameters[k]!;
    field(k);
    field(`${typeof v}:${String(v)}`);
  }
  field('outputs');
  for (const o of [...new Set(outputNames)].sort()) field(o);
  return h.digest('hex');
}

/**
 * Tensors as bytes: u32 header length, JSON header [{name, datatype, shape,
 * byteLength}], then each tensor's bytes in order.
 */
export function encodeTensors(tensors: readonly Tensor[]): Uint8Array {
  const header = Buffer.from(JSON.stringify(tensors.map((t) => ({ n: t.name, d: t.datatype, s: t.shape, b: t.data.byteLength }))));
  const total = 4 + header.byteLength + tensors.reduce((a, t) => a + t.data.byteLength, 0);
  const out = Buffer.allocUnsafe(total);
  out.writeUInt32LE(header.byteLength, 0);
  header.copy(out, 4);
  let at = 4 + header.byteLength;
  for (const t of tensors) {
    out.set(t.data, at);
    at += t.data.byteLength;
  }
  return out;
}

/** The inverse of encodeTensors; undefined when the bytes are not a well-formed entry. */
export function decodeTensors(bytes: Uint8Array): Tensor[] | undefined {
  try {
    const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const len = buf.readUInt32LE(0);
    const header = JSON.parse(buf.subarray(4, 4 + len).toString()) as Array<{ n: string; d: string; s: number[]; b: number }>;
    let at = 4 + len;
    const out: Tensor[] = [];
    for (const h of header) {
      if (!isDatatype(h.d) || at + h.b > buf.byteLength) return undefined;
      // A copy: the caller may hand it to a client that keeps it while the entry is evicted or replaced.
      out.push({ name: h.n, datatype: h.d, shape: h.s, data: new Uint8Array(buf.subarray(at, at + h.b)) });
      at += h.b;
    }
    return at === buf.byteLength ? out : undefined;
  } catch {
    // A value that does not decode is a miss: the request runs the model, and the bad entry is overwritten.
    return undefined;
  }
}
