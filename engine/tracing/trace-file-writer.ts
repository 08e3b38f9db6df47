// Triton's JSON trace file: an array of per-trace objects
// { id, model_name, model_version, [request_id], [parent_id], timestamps:
// [{ name, ns }] }, plus, at level TENSORS, { id, activity, tensor } objects.
// log_frequency N > 0 writes every N traces to `<file>.<index>`; 0 keeps them
// until flush() (settings change or server stop) and writes `<file>`.
import fs from 'node:fs';
import type { RequestTrace } from '../api/request-trace.ts';
import { deserializeBytes } from '../api/datatypes.ts';
import type { Tensor } from '../api/infer-request.ts';
import { log } from '../../common/logger.ts';
import { O_NOFOLLOW } from '../api/client-paths.ts';

/** The JSON objects of one trace in Triton's format. */
export function traceToJson(t: RequestTrace): Array<Record<string, unknown>> {
  const head: Record<string, unknown> = { id: t.id, model_name: t.modelName, model_version: Number(t.modelVersion) };
  if (t.requestId) head.request_id = t.requestId;
  if (t.parent) head.parent_id = t.parent.id;
  head.timestamps = t.timestamps.map((x) => ({ name: x.name, ns: Number(x.ns) }));
  return [head, ...t.tensors.map((x) => ({ id: t.id, activity: x.activity, tensor: tensorToJson(x.tensor) }))];
}

function tensorToJson(t: Tensor): Record<string, string> {
  return { name: t.name, data: tensorData(t), shape: t.shape.join(','), dtype: t.datatype };
}

/** The tensor's values as comma-separated text (Triton's TENSORS level). */
function tensorData(t: Tensor): string {
  const b = Uint8Array.from(t.data).buffer;
  switch (t.datatype) {
    case 'FP32':
      return [...new Float32Array(b)].join(',');
    case 'FP64':
      return [...new Float64Array(b)].join(',');
    case 'INT8':
      return [...new Int8Array(b)].join(',');
    case 'INT16':
      return [...new Int16Array(b)].join(',');
    case 'INT32':
      return [...new Int32Array(b)].join(',');
    case 'INT64':
      return [...new BigInt64Array(b)].join(',');
    case 'UINT8':
    case 'BOOL':
      return [...new Uint8Array(b)].join(',');
    case 'UINT16':
      return [...new Uint16Array(b)].join(',');
    case 'UINT32':
      return [...new Uint32Array(b)].join(',');
    case 'UINT64':
      return [...new BigUint64Array(b)].join(',');
    case 'BYTES':
      return deserializeBytes(t.data, t.name)
        .map((x) => Buffer.from(x).toString())
        .join(',');
    default:
      return '';
  }
}

export class TraceFileWriter {
  private buffered: Array<Record<string, unknown>> = [];
  private count = 0;
  private index = 0;

  /** `noFollow`: a file a client named; a symbolic link planted there is refused, not followed. */
  constructor(
    readonly file: string,
    private readonly logFrequency: number,
    private readonly noFollow = false,
  ) {}

  add(t: RequestTrace): void {
    this.buffered.push(...traceToJson(t));
    this.count++;
    if (this.logFrequency > 0 && this.count >= this.logFrequency) this.write(`${this.file}.${this.index++}`);
  }

  /** Write what is buffered: to `<file>` (log_frequency 0) or the next `<file>.<index>`. */
  flush(): void {
    if (!this.count) return;
    this.write(this.logFrequency > 0 ? `${this.file}.${this.index++}` : this.file);
  }

  private write(file: string): void {
    const out = this.buffered;
    // log_frequency 0: one file holding every trace, rewritten whole at each flush.
    if (this.logFrequency > 0) this.buffered = [];
    this.count = 0;
    try {
      const flags = fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_TRUNC | (this.noFollow ? O_NOFOLLOW : 0);
      const fd = fs.openSync(file, flags, 0o644);
      try {
        fs.writeFileSync(fd, JSON.stringify(out));
      } finally {
        fs.closeSync(fd);
      }
    } catch (err) {
      log.error(`cannot write trace file '${file}'`, err);
    }
  }
}
