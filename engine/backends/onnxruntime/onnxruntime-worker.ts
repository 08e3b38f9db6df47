// One ONNX Runtime session on its own thread. Owns the session and its shm
// mappings; runs one request at a time (the pool never sends two at once).
// session.run blocks this thread, never the engine's event loop.
import { parentPort, workerData } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';
import { deserializeBytes, serializeBytes, typedView } from '../../../protocol/tensor-codec.ts';
import { datatypeOfOrt } from './ort-types.ts';
import type { FromWorker, ToWorker, WireTensorIn, WireTensorOut, WorkerInit, WireMeta, WireShm } from './onnxruntime-messages.ts';

const init = workerData as WorkerInit;
const port = parentPort!;
let session: ort.InferenceSession;

// A cached mapping of one registered region. It is made through the engine's
// fd (valid during the run that carries it), so the worker reads the object the
// engine checked, and each use fstats that fd first (truncated: error, not SIGBUS).
type ShmMap = { mapping: import('../../../native/index.ts').ShmMapping; key: string };
const mappings = new Map<string, ShmMap>();
let native: typeof import('../../../native/index.ts') | undefined;
/** Mappings the current run reads or writes; checked for SIGBUS-guard faults after it. */
let inUse: ShmMap[] = [];
/** Keys to forget once the current run ends (never unmap under a running session). */
let running = false;
const forgetAfterRun = new Set<string>();

/** A view of a tensor's bytes in a region, mapping the whole region once (first touch is slow). */
async function mapShm(s: WireShm): Promise<Uint8Array> {
  native ??= await import('../../../native/index.ts');
  const id = `${s.key}:${s.fd}:${s.regionOffset}:${s.regionSize}`;
  let m = mappings.get(id);
  if (m?.mapping.faulted) {
    // The guard put zero pages in for good: map the object afresh.
    dropMapping(id, m);
    m = undefined;
  }
  const fd = s.fd as import('../../../native/index.ts').ShmFd;
  if (!m) {
    m = { mapping: native.shmMap(fd, s.regionOffset, s.regionSize), key: s.key };
    mappings.set(id, m);
  }
  if (s.offset + s.byteSize > m.mapping.bytes.byteLength) throw new Error(`shm slice out of bounds in ${s.key}`);
  const needEnd = s.regionOffset + s.offset + s.byteSize;
  const { ok, size } = native.checkSize(fd, needEnd);
  if (!ok) throw new Error(`shared memory object '${s.key}' was truncated to ${size} bytes; the tensor needs bytes up to ${needEnd}`);
  inUse.push(m);
  return m.mapping.bytes.subarray(s.offset, s.offset + s.byteSize);
}

function dropMapping(id: string, m: ShmMap): void {
  mappings.delete(id);
  m.mapping.close();
}

function forgetKey(key: string): void {
  for (const [id, m] of mappings) if (m.key === key) dropMapping(id, m);
}

/** A typed view of a tensor's bytes for ORT (a copy only when unaligned). */
function view(type: string, bytes: Uint8Array): ArrayBufferView {
  const dt = datatypeOfOrt(type);
  if (!dt || dt === 'BYTES') throw new Error(`unsupported tensor type ${type}`);
  return typedView(dt, bytes);
}

const utf8 = new TextDecoder();
const decodeStrings = (bytes: Uint8Array) => deserializeBytes(bytes).map((b) => utf8.decode(b));
const encodeStrings = (items: readonly string[]) => serializeBytes(items);

async function feedOf(t: WireTensorIn): Promise<ort.Tensor> {
  const bytes = t.shm ? await mapShm(t.shm) : new Uint8Array(t.buffer!, t.byteOffset ?? 0, t.byteLength ?? t.buffer!.byteLength);
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
  // Inputs share one pooled buffer: list it once (a duplicate in a transfer list throws).
  const returned = [...new Set(msg.inputs.flatMap((t) => (t.buffer ? [t.buffer] : [])))];
  running = true;
  inUse = [];
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
    const runOptions = init.runOptions as ort.InferenceSession.RunOptions | undefined;
    const res = msg.outputs.length
      ? await session.run(feeds, fetches as ort.InferenceSession.FetchesType, runOptions)
      : await session.run(feeds, runOptions);
    const inferNs = Number(process.hrtime.bigint() - t0);
    const faulted = inUse.find((m) => m.mapping.faulted);
    if (faulted)
      throw new Error(`shared memory object '${faulted.key}' shrank while the model read it (its pages read as zeros); results discarded`);
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
      outputs.push({
        name,
        type: tensor.type,
        dims,
        buffer: bytes.buffer as ArrayBuffer,
        byteOffset: bytes.byteOffset,
        byteLength: bytes.byteLength,
      });
    }
    post({ kind: 'result', seq: msg.seq, outputs, returned, inferNs }, transfer);
  } catch (err) {
    post({ kind: 'run-error', seq: msg.seq, message: (err as Error).message, returned }, returned);
  } finally {
    running = false;
    inUse = [];
    for (const key of forgetAfterRun) forgetKey(key);
    forgetAfterRun.clear();
  }
}

function post(m: FromWorker, transfer: ArrayBuffer[] = []): void {
  port.postMessage(m, transfer);
}

port.on('message', (m: ToWorker) => {
  if (m.kind === 'run') void run(m);
  else if (m.kind === 'forget-shm') {
    if (running) forgetAfterRun.add(m.key);
    else forgetKey(m.key);
  } else if (m.kind === 'close') {
    for (const [id, mp] of mappings) dropMapping(id, mp);
    void session?.release().finally(() => post({ kind: 'closed' }));
  }
});

try {
  session = await ort.InferenceSession.create(init.modelPath, init.sessionOptions as ort.InferenceSession.SessionOptions);
  post({ kind: 'ready', inputs: meta(session.inputMetadata), outputs: meta(session.outputMetadata) });
} catch (err) {
  post({ kind: 'load-error', message: (err as Error).message });
}
