// Reads an ONNX file's graph inputs/outputs (names, element types, dims)
// without creating a session, for config auto-complete and checks at load.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import type { IOInfo } from '../../api/backend.ts';
import type { Datatype } from '../../api/datatypes.ts';
import { invalidArg } from '../../api/status.ts';

const require = createRequire(import.meta.url);

// onnx.TensorProto.DataType numbers.
const ELEM: Record<number, Datatype> = {
  1: 'FP32',
  2: 'UINT8',
  3: 'INT8',
  4: 'UINT16',
  5: 'INT16',
  6: 'INT32',
  7: 'INT64',
  8: 'BYTES',
  9: 'BOOL',
  10: 'FP16',
  11: 'FP64',
  12: 'UINT32',
  13: 'UINT64',
  16: 'BF16',
};

interface ValueInfo {
  name: string;
  type?: { tensorType?: { elemType?: number; shape?: { dim?: Array<{ dimValue?: number | { toNumber(): number }; dimParam?: string }> } } };
}

function info(v: ValueInfo): IOInfo | undefined {
  const tt = v.type?.tensorType;
  const dt = tt?.elemType !== undefined ? ELEM[tt.elemType] : undefined;
  if (!dt) return undefined;
  const shape = (tt?.shape?.dim ?? []).map((d) => {
    const n = typeof d.dimValue === 'object' && d.dimValue ? d.dimValue.toNumber() : Number(d.dimValue ?? 0);
    return d.dimParam || !n ? -1 : n;
  });
  return { name: v.name, datatype: dt, shape };
}

/**
 * Protobuf fields of a file read in place (positioned reads through a small
 * window), so the tensors' bytes are never read: a load under the memory
 * budget measures RSS across it, and a whole-file read left that much garbage
 * for V8 to free at some point of the measurement or after it (the same model
 * was charged 37 or 78 MiB).
 */
class FieldReader {
  private readonly win = Buffer.allocUnsafe(64 * 1024);
  private winAt = 0;
  private winLen = 0;

  constructor(
    private readonly fd: number,
    private readonly file: string,
  ) {}

  byteAt(pos: number): number {
    if (pos < this.winAt || pos >= this.winAt + this.winLen) {
      this.winAt = pos;
      this.winLen = fs.readSync(this.fd, this.win, 0, this.win.length, pos);
      if (this.winLen === 0) throw new Error(`truncated at byte ${pos}`);
    }
    return this.win[pos - this.winAt]!;
  }

  bytes(pos: number, len: number): Buffer {
    const b = Buffer.allocUnsafe(len);
    if (fs.readSync(this.fd, b, 0, len, pos) !== len) throw new Error(`truncated at byte ${pos + len}`);
    return b;
  }

  /** The varint at `pos`: its value and where the next field starts. */
  varint(pos: number): [number, number] {
    let v = 0;
    for (let shift = 0; shift < 64; shift += 7) {
      const b = this.byteAt(pos++);
      v += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return [v, pos];
    }
    throw new Error(`bad varint before byte ${pos}`);
  }

  /** Call `fn(field, start, length)` for each length-delimited field in [pos, end); other wire types are skipped. */
  each(pos: number, end: number, fn: (field: number, start: number, len: number) => void): void {
    while (pos < end) {
      const [key, p] = this.varint(pos);
      const wire = key % 8;
      if (wire === 0) pos = this.varint(p)[1];
      else if (wire === 1) pos = p + 8;
      else if (wire === 5) pos = p + 4;
      else if (wire === 2) {
        const [len, at] = this.varint(p);
        if (at + len > end) throw new Error(`field ${Math.floor(key / 8)} runs past its message`);
        fn(Math.floor(key / 8), at, len);
        pos = at + len;
      } else throw new Error(`unsupported wire type ${wire} in ${this.file}`);
    }
    if (pos !== end) throw new Error('a field runs past its message');
  }
}

// Field numbers of onnx.proto: ModelProto.graph; GraphProto.initializer / input / output; TensorProto.name.
const MODEL_GRAPH = 7;
const GRAPH_INITIALIZER = 5;
const GRAPH_INPUT = 11;
const GRAPH_OUTPUT = 12;
const TENSOR_NAME = 8;

/** Graph inputs (minus initializers) and outputs of an ONNX model file. */
export function readOnnxIO(file: string): { inputs: IOInfo[]; outputs: IOInfo[] } {
  const { onnx } = require('onnx-proto') as { onnx: { ValueInfoProto: { decode(b: Uint8Array): ValueInfo } } };
  const init = new Set<string>();
  const ins: ValueInfo[] = [];
  const outs: ValueInfo[] = [];
  const fd = fs.openSync(file, 'r');
  try {
    const r = new FieldReader(fd, file);
    r.each(0, fs.fstatSync(fd).size, (f, at, len) => {
      if (f !== MODEL_GRAPH) return;
      r.each(at, at + len, (g, gAt, gLen) => {
        if (g === GRAPH_INPUT) ins.push(onnx.ValueInfoProto.decode(r.bytes(gAt, gLen)));
        else if (g === GRAPH_OUTPUT) outs.push(onnx.ValueInfoProto.decode(r.bytes(gAt, gLen)));
        else if (g === GRAPH_INITIALIZER) {
          r.each(gAt, gAt + gLen, (t, tAt, tLen) => {
            if (t === TENSOR_NAME) init.add(r.bytes(tAt, tLen).toString('utf8'));
          });
        }
      });
    });
  } catch (err) {
    throw invalidArg(`${file}: not a valid ONNX model (${(err as Error).message})`);
  } finally {
    fs.closeSync(fd);
  }
  const inputs = ins.filter((i) => !init.has(i.name)).flatMap((v) => info(v) ?? []);
  const outputs = outs.flatMap((v) => info(v) ?? []);
  return { inputs, outputs };
}
