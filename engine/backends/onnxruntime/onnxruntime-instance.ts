// One onnxruntime execution instance: a worker thread owning one
// InferenceSession. Batches its requests' inputs into a pooled, transferred
// buffer (shm inputs of a lone request go by reference), runs them on the
// worker, splits the outputs back per request, and respawns a crashed worker
// on its next request. Its state (RUNNING, DEAD, CLOSED) is a Lifecycle
// (common/lifecycle.ts) private to it.
import type { Worker } from 'node:worker_threads';
import type { BackendContext } from '../../api/backend.ts';
import type { ExecuteResult, ExecutionInstance } from '../../api/scheduler.ts';
import type { InferRequest, InferResponse, Tensor } from '../../api/infer-request.ts';
import type { FromWorker, ToWorker, WireMeta, WireOutputRequest, WireTensorIn, WireTensorOut } from './onnxruntime-messages.ts';
import { datatypeOfOrt, ortTypeOf } from './ort-types.ts';
import { StatusError, internal, invalidArg, unavailable } from '../../api/status.ts';
import { deserializeBytes, serializeBytes } from '../../api/datatypes.ts';
import type { ModelConfig } from '../../api/model-config.ts';
import { stateOutputs } from '../../config/sequence-config.ts';
import { batchDims, batchInputTensors, batchOutputSources, raggedInputs, scatterBatchOutput } from './ragged-batch.ts';
import { log, tracer } from '../../../common/logger.ts';
import { Lifecycle, type TransitionTable } from '../../../common/lifecycle.ts';

const trace = tracer('onnxruntime');
const ALIGN = 64;

/** A worker serving, a worker gone (respawned on the next request), or the instance unloaded for good. */
export type OnnxInstanceState = 'RUNNING' | 'DEAD' | 'CLOSED';

export const ONNX_INSTANCE_TRANSITIONS: TransitionTable<OnnxInstanceState> = {
  RUNNING: ['DEAD', 'CLOSED'],
  DEAD: ['RUNNING', 'CLOSED'],
  CLOSED: [],
};

/**
 * One execution instance: a worker and its session. The scheduler calls
 * execute() at most once at a time per instance; post() is for control
 * messages (forget-shm) and may interleave with a run.
 */
export class OnnxInstance implements ExecutionInstance {
  private seq = 0;
  private pending = new Map<number, { resolve: (m: FromWorker) => void; reject: (e: Error) => void }>();
  private spare: ArrayBuffer[] = [];
  readonly #life: Lifecycle<OnnxInstanceState>;
  /** Set once the current worker is gone (died, or closed): its exit then reports nothing more. */
  private gone: Error | undefined;
  private worker!: Worker;
  meta?: { inputs: WireMeta[]; outputs: WireMeta[] };

  constructor(
    readonly name: string,
    private readonly spawn: () => Worker,
    private readonly ctx: BackendContext,
  ) {
    this.#life = new Lifecycle(ONNX_INSTANCE_TRANSITIONS, 'RUNNING', `instance ${name} of model '${ctx.modelName}'`);
    this.attach(spawn());
  }

  get state(): OnnxInstanceState {
    return this.#life.state;
  }

  /** Wire a (new) worker: results resolve pending runs; a crash fails them and marks the instance for respawn. */
  private attach(worker: Worker): void {
    this.worker = worker;
    if (this.#life.state === 'DEAD') this.#life.to('RUNNING');
    this.gone = undefined;
    worker.on('message', (m: FromWorker) => {
      if (m.kind === 'result' || m.kind === 'run-error') {
        for (const b of m.returned) this.recycle(b);
        const p = this.pending.get(m.seq);
        this.pending.delete(m.seq);
        p?.resolve(m);
      }
    });
    const die = (err: Error) => {
      if (this.worker !== worker) return;
      // A second error of the same worker, or one while closing, fails what it still held; the state moves once.
      if (this.#life.state === 'RUNNING') this.#life.to('DEAD');
      this.gone = err;
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
      if (this.#life.state !== 'CLOSED')
        log.error(`instance ${this.name} of '${this.ctx.modelName}' died; it restarts on its next request`, err);
    };
    worker.on('error', (e) => die(internal(`instance ${this.name} failed`, e)));
    worker.on('exit', (code) => {
      if (!this.gone) die(internal(`instance ${this.name} exited (code ${code})`));
    });
  }

  /** Replace a crashed worker with a fresh session. */
  private async respawn(): Promise<void> {
    this.attach(this.spawn());
    await this.ready();
    log.info(`instance ${this.name} of '${this.ctx.modelName}' restarted`);
  }

  /** Wait for the session to load in the worker. */
  ready(): Promise<void> {
    return new Promise((resolve, reject) => {
      const on = (m: FromWorker) => {
        if (m.kind === 'ready') {
          this.meta = { inputs: m.inputs, outputs: m.outputs };
          this.worker.off('message', on);
          resolve();
        } else if (m.kind === 'load-error') {
          this.worker.off('message', on);
          reject(invalidArg(`model '${this.ctx.modelName}' version ${this.ctx.version}: onnxruntime failed to load: ${m.message}`));
        }
      };
      this.worker.on('message', on);
      this.worker.once('error', reject);
    });
  }

  private buffer(bytes: number): ArrayBuffer {
    const i = this.spare.findIndex((b) => b.byteLength >= bytes);
    if (i >= 0) return this.spare.splice(i, 1)[0]!;
    return new ArrayBuffer(Math.max(65536, Math.ceil(bytes / 65536) * 65536));
  }

  private recycle(b: ArrayBuffer): void {
    if (b.byteLength === 0 || this.spare.length >= 4) return;
    this.spare.push(b);
  }

  post(m: ToWorker, transfer: ArrayBuffer[] = []): void {
    this.worker.postMessage(m, transfer);
  }

  async execute(requests: InferRequest[]): Promise<ExecuteResult> {
    const state = this.#life.state;
    if (state === 'CLOSED') throw unavailable(`instance ${this.name} of model '${this.ctx.modelName}' is not running`);
    if (state === 'DEAD') await this.respawn();
    const t0 = process.hrtime.bigint();
    const { config } = this.ctx;
    const batched = config.max_batch_size > 0 && requests.length > 1;
    const first = requests[0]!;
    const inputs: WireTensorIn[] = [];
    const transfer: ArrayBuffer[] = [];
    // Shm inputs of a lone request are read in place by the worker.
    const inPlace = requests.length === 1 ? first.inputs.filter((t) => t.shmLocation) : [];
    const copied = first.inputs.filter((t) => !inPlace.includes(t));
    // Ragged inputs go flattened; batch inputs describe the batch (ragged-batch.ts).
    const ragged = raggedInputs(config);
    const extra = config.batch_input?.length ? batchInputTensors(config, requests) : [];
    let total = 0;
    for (const t of copied) {
      for (const r of requests) total += byName(r, t.name).data.byteLength;
      total = Math.ceil(total / ALIGN) * ALIGN;
    }
    for (const t of extra) total += Math.ceil(t.data.byteLength / ALIGN) * ALIGN;
    const buf = copied.length || extra.length ? this.buffer(total) : undefined;
    if (buf) transfer.push(buf);
    const out = buf ? new Uint8Array(buf) : undefined;
    let off = 0;
    for (const t of first.inputs) {
      const type = ortTypeOf(t.datatype);
      if (!type) throw invalidArg(`input '${t.name}': datatype ${t.datatype} is not supported by onnxruntime`);
      const dims = batchDims(t.name, requests, ragged, batched);
      if (inPlace.includes(t)) {
        const loc = t.shmLocation!;
        inputs.push({
          name: t.name,
          type,
          dims,
          shm: {
            key: loc.key,
            fd: loc.fd,
            regionOffset: loc.regionOffset,
            regionSize: loc.regionSize,
            offset: loc.offset - loc.regionOffset,
            byteSize: loc.byteSize,
          },
        });
        continue;
      }
      const start = off;
      for (const r of requests) {
        const d = byName(r, t.name).data;
        out!.set(d, off);
        off += d.byteLength;
      }
      inputs.push({ name: t.name, type, dims, buffer: buf, byteOffset: start, byteLength: off - start });
      off = Math.ceil(off / ALIGN) * ALIGN;
    }
    for (const t of extra) {
      out!.set(t.data, off);
      inputs.push({
        name: t.name,
        type: ortTypeOf(t.datatype)!,
        dims: t.shape,
        buffer: buf,
        byteOffset: off,
        byteLength: t.data.byteLength,
      });
      off = Math.ceil((off + t.data.byteLength) / ALIGN) * ALIGN;
    }
    const wanted = wantedOutputs(requests, config);
    const outputs: WireOutputRequest[] = wanted.map((name) => ({ name }));
    const seq = ++this.seq;
    const reply = new Promise<FromWorker>((resolve, reject) => this.pending.set(seq, { resolve, reject }));
    const t1 = process.hrtime.bigint();
    this.post({ kind: 'run', seq, inputs, outputs }, transfer);
    const m = await reply;
    const t2 = process.hrtime.bigint();
    if (m.kind === 'run-error') {
      const err = invalidArg(`onnxruntime failed on model '${this.ctx.modelName}': ${m.message}`);
      return { responses: requests.map(() => err), timing: timing(t0, t1, t2, t2) };
    }
    if (m.kind !== 'result') throw internal('unexpected worker reply');
    const responses = split(requests, m.outputs, this.ctx, batched);
    const t3 = process.hrtime.bigint();
    if (trace.enabled) trace(`${this.name} ran ${requests.length} request(s) in ${(m.inferNs / 1e6).toFixed(2)} ms`, first.id);
    return {
      responses,
      timing: {
        computeInputNs: Number(t1 - t0),
        computeInferNs: m.inferNs,
        computeOutputNs: Number(t3 - t2) + Math.max(0, Number(t2 - t1) - m.inferNs),
      },
    };
  }

  async close(): Promise<void> {
    const was = this.#life.state;
    if (was === 'CLOSED') return;
    this.#life.to('CLOSED');
    if (was === 'DEAD') return;
    const closed = new Promise<void>((resolve) => {
      const on = (m: FromWorker) => m.kind === 'closed' && resolve();
      this.worker.on('message', on);
      this.worker.once('exit', () => resolve());
    });
    this.post({ kind: 'close' });
    await Promise.race([closed, new Promise((r) => setTimeout(r, 2000))]);
    this.gone = unavailable('closed');
    await this.worker.terminate();
  }
}

function timing(t0: bigint, t1: bigint, t2: bigint, t3: bigint) {
  return { computeInputNs: Number(t1 - t0), computeInferNs: Number(t2 - t1), computeOutputNs: Number(t3 - t2) };
}

function byName(r: InferRequest, name: string): Tensor {
  const t = r.inputs.find((x) => x.name === name);
  if (!t) throw invalidArg(`input '${name}' missing from a batched request`);
  return t;
}

function wantedOutputs(requests: InferRequest[], config: ModelConfig): string[] {
  // Implicit-state outputs are asked for by the sequence batcher, beside the config's outputs.
  const all = [...config.output.map((o) => o.name), ...stateOutputs(config)];
  if (requests.some((r) => r.outputs.length === 0)) return all;
  const set = new Set(requests.flatMap((r) => r.outputs.map((o) => o.name)));
  return all.filter((n) => set.has(n));
}

/** Split batched outputs back per request (views, no copies for fixed-size types). */
function split(requests: InferRequest[], outs: WireTensorOut[], ctx: BackendContext, batched: boolean): Array<InferResponse | StatusError> {
  const version = String(ctx.version);
  const tensors = outs.map((o) => {
    const datatype = datatypeOfOrt(o.type);
    if (!datatype) throw internal(`model '${ctx.modelName}' output '${o.name}' has unsupported type ${o.type}`);
    return { name: o.name, datatype, shape: o.dims, data: new Uint8Array(o.buffer!, o.byteOffset, o.byteLength) };
  });
  // batch_output targets go by their source input's shapes (ragged-batch.ts), the others by rows.
  const sources = ctx.config.batch_output?.length ? batchOutputSources(ctx.config) : undefined;
  const scattered = new Map<string, Tensor[]>();
  for (const t of tensors) {
    const source = sources?.get(t.name);
    if (source) scattered.set(t.name, scatterBatchOutput(ctx.config, t, source, requests));
  }
  let row = 0;
  return requests.map((r, i) => {
    const bs = batched ? r.inputs[0]!.shape[0]! : 0;
    const want = r.outputs.length ? new Set(r.outputs.map((o) => o.name)) : undefined;
    const outputs = tensors
      .filter((t) => !want || want.has(t.name))
      .map((t) => scattered.get(t.name)?.[i] ?? (batched ? sliceRows(t, row, bs) : t));
    row += bs;
    return { modelName: ctx.modelName, modelVersion: version, id: r.id, outputs };
  });
}

function sliceRows(t: Tensor, start: number, count: number): Tensor {
  const total = t.shape[0]!;
  const shape = [count, ...t.shape.slice(1)];
  if (t.datatype === 'BYTES') {
    const items = deserializeBytes(t.data, t.name);
    const per = items.length / total;
    return { ...t, shape, data: serializeBytes(items.slice(start * per, (start + count) * per)) };
  }
  const rowBytes = t.data.byteLength / total;
  return { ...t, shape, data: t.data.subarray(start * rowBytes, (start + count) * rowBytes) };
}
