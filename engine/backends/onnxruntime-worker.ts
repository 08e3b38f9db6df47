// One ONNX Runtime session on its own thread. Owns the session and its shm
// mappings; runs one request at a time (the pool never sends two at once).
// session.run blocks this thread, never the engine's event loop.
import { parentPort, workerData } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';
import type {
  FromWorker,
  ToWorker,
  WireTensorIn,
  WireTensorOut,
  WorkerInit,
  WireMeta,
  WireShm,
} from './onnxruntime-messages.ts';

const init = workerData as WorkerInit;
const port = parentPort!;
let session: ort.InferenceSession;

type ShmMap = { bytes: Uint8Array; close(): void; fd: number };
const mappings = new Map<string, ShmMap>();
let native: typeof import('../../native/index.ts') | undefined;

/** A view of a tensor's bytes in a region, mapping the whole region once (first touch is slow). */
async function mapShm(s: WireShm): Promise<Uint8Array> {
  native ??= await import('../../native/index.ts');
  const id = `${s.key}:${s.regionOffset}:${s.regionSize}`;
  let m = mappings.get(id);
  if (!m) {
    const fd = native.shmOpen(s.key, {});
    try {
      const mp = native.shmMap(fd, s.regionOffset, s.regionSize);
      m = { bytes: mp.bytes, close: () => mp.close(), fd };
    } finally {
      native.shmClose(fd);
    }
    mappings.set(id, m);
  }
  if (s.offset + s.byteSize > m.bytes.byteLength) throw new Error(`shm slice out of bounds in ${s.key}`);
  return m.bytes.subarray(s.offset, s.offset + s.byteSize);
}

const TYPED: Record<string, new (b: ArrayBuffer, o: number, n: number) => ArrayBufferView> = {
  float32: Float32Array, float64: Float64Array, int8: Int8Array, uint8: Uint8Array, bool: Uint8Array,
  int16: Int16Array, uint16: Uint16Array, float16: Uint16Array, int32: Int32Array, uint32: Uint32Array,
  int64: BigInt64Array, uint64: BigUint64Array,
};
const SIZE: Record<string, number> = {
  float32: 4, float64: 8, int8: 1, uint8: 1, bool: 1, int16: 2, uint16: 2, float16: 2,
  int32: 4, uint32: 4, int64: 8, uint64: 8,
};

function view(type: string, bytes: Uint8Array): ArrayBufferView {
  const C = TYPED[type];
  if (!C) throw new Error(`unsupported tensor type ${type}`);
  const size = SIZE[type]!;
  let src = bytes;
  if (bytes.byteOffset % size !== 0) src = bytes.slice();
  return new C(src.buffer as ArrayBuffer, src.byteOffset, src.byteLength / size);
}

function decodeStrings(bytes: Uint8Array): string[] {
  const out: string[] = [];
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const dec = new TextDecoder();
  for (let o = 0; o < bytes.byteLength; ) {
    const n = dv.getUint32(o, true);
    out.push(dec.decode(bytes.subarray(o + 4, o + 4 + n)));
    o += 4 + n;
  }
  return out;
}

function encodeStrings(items: readonly string[]): Uint8Array {
  const enc = new TextEncoder();
  const parts = items.map((s) => enc.encode(s));
  const out = new Uint8Array(parts.reduce((n, p) => n + 4 + p.byteLength, 0));
  const dv = new DataView(out.buffer);
  let o = 0;
  for (const p of parts) {
    dv.setUint32(o, p.byteLength, true);
    out.set(p, o + 4);
    o += 4 + p.byteLength;
  }
  return out;
}

async function feedOf(t: WireTensorIn): Promise<ort.Tensor> {
  const bytes = t.shm
    ? await mapShm(t.shm)
    : new Uint8Array(t.buffer!, t.byteOffset ?? 0, t.byteLength ?? t.buffer!.byteLength);
  if (t.type === 'string') return new ort.Tensor('string', decodeStrings(bytes), t.dims);
  return new ort.Tensor(t.type as 'float32', view(t.type, bytes) as Float32Array, t.dims);
}

function meta(m: readonly ort.InferenceSession.ValueMetadata[]): WireMeta[] {
  return m.map((x) =>
    x.isTensor
      ? { name: x.name, type: x.type, shape: x.shape.map((d) => (typeof d === 'number' ? d : String(d))) }
      : { name: x.name, type: 'unknown', shape: [] },
  );
}

async function run(msg: Extract<ToWorker, { kind: 'run' }>): Promise<void> {
  const returned = msg.inputs.flatMap((t) => (t.buffer ? [t.buffer] : []));
  try {
    const feeds: Record<string, ort.Tensor> = {};
    for (const t of msg.inputs) feeds[t.name] = await feedOf(t);
    const fetches: Record<string, ort.Tensor | null> = {};
    for (const o of msg.outputs) {
      if (o.shm && o.shm.type !== 'string') {
        const bytes = await mapShm(o.shm);
        fetches[o.name] = new ort.Tensor(o.shm.type as 'float32', view(o.shm.type, bytes) as Float32Array, o.shm.dims);
      } else fetches[o.name] = null;
    }
    const t0 = process.hrtime.bigint();
    const res = await session.run(feeds, msg.outputs.length ? (fetches as ort.InferenceSession.FetchesType) : undefined as never);
    const inferNs = Number(process.hrtime.bigint() - t0);
    const outputs: WireTensorOut[] = [];
    const transfer: ArrayBuffer[] = [...returned];
    for (const [name, tensor] of Object.entries(res)) {
      const dims = [...tensor.dims];
      const req = msg.outputs.find((o) => o.name === name);
      if (req?.shm && req.shm.type !== 'string') {
        outputs.push({ name, type: tensor.type, dims, inShm: true });
        continue;
      }
      let bytes: Uint8Array;
      if (tensor.type === 'string') bytes = encodeStrings(tensor.data as string[]);
      else {
        const d = tensor.data as ArrayBufferView;
        bytes = new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
      }
      if (!transfer.includes(bytes.buffer as ArrayBuffer)) transfer.push(bytes.buffer as ArrayBuffer);
      outputs.push({ name, type: tensor.type, dims, buffer: bytes.buffer as ArrayBuffer, byteOffset: bytes.byteOffset, byteLength: bytes.byteLength });
    }
    post({ kind: 'result', seq: msg.seq, outputs, returned, inferNs }, transfer);
  } catch (err) {
    post({ kind: 'run-error', seq: msg.seq, message: (err as Error).message, returned }, returned);
  }
}

function post(m: FromWorker, transfer: ArrayBuffer[] = []): void {
  port.postMessage(m, transfer);
}

port.on('message', (m: ToWorker) => {
  if (m.kind === 'run') void run(m);
  else if (m.kind === 'forget-shm') {
    for (const [id, mp] of mappings) {
      if (id.startsWith(`${m.key}:`)) {
        mp.close();
        mappings.delete(id);
      }
    }
  } else if (m.kind === 'close') {
    for (const mp of mappings.values()) mp.close();
    mappings.clear();
    void session?.release().finally(() => post({ kind: 'closed' }));
  }
});

try {
  session = await ort.InferenceSession.create(init.modelPath, init.sessionOptions as ort.InferenceSession.SessionOptions);
  post({ kind: 'ready', inputs: meta(session.inputMetadata), outputs: meta(session.outputMetadata) });
} catch (err) {
  post({ kind: 'load-error', message: (err as Error).message });
}
