// The js backend: this project's answer to Triton's Python backend. A model is
// `<version>/model.js` or `model.ts` exporting initialize / execute(requests)
// / finalize over raw little-endian tensor bytes. It runs in the engine's
// process and thread (no IPC per hop): execute must stay asynchronous (sharp,
// I/O) or cheap, since it shares the event loop with the frontends. Loading
// (bundling, where imports resolve, per-instance scope) is js-module-loader.ts;
// initialize's ctx.infer lets a model call other models (like Triton's BLS).
import path from 'node:path';
import type { Backend, BackendContext, BackendModel } from '../../api/backend.ts';
import type { ExecuteResult, ExecutionInstance } from '../../api/scheduler.ts';
import type { InferRequest, InferResponse } from '../../api/infer-request.ts';
import { StatusError, invalidArg, internal, isStatusCode, unavailable, type StatusCode } from '../../api/status.ts';
import { fromConfigType, isDatatype, type Datatype } from '../../api/datatypes.ts';
import { bundleModelFile, evaluateModel, findModelFile } from './js-module-loader.ts';
import { RequestCancel, type CancelSignal } from '../../api/cancel-signal.ts';
import { isDecoupled } from '../../api/decoupled.ts';
import { DecoupledSender, type JsResponseSender, type JsResult } from './js-decoupled-sender.ts';
import { batchOutputTargets, requestBatchInputs, scatterRequestOutputs } from '../ragged-requests.ts';

interface JsTensor {
  datatype: string;
  shape: number[];
  data: Uint8Array;
}
/** What execute() gets per request. */
interface JsRequest {
  inputs: Record<string, JsTensor>;
  requestedOutputs: string[];
  parameters: Record<string, unknown>;
  /** Aborted when the request is cancelled (client gone, deadline passed): stop early. */
  signal: CancelSignal;
  /**
   * Decoupled models only (model_transaction_policy { decoupled: true }):
   * send one response now; the request ends when execute() resolves (its
   * return value is then ignored). Sending after that throws.
   */
  send?: (result: JsResult) => void;
  /**
   * Decoupled models only: the request's response sender (Triton's response
   * factory). Taking it keeps the request open after execute() resolves,
   * until a send with `final: true`; the instance serves other requests meanwhile.
   */
  responseSender?: () => JsResponseSender;
}
interface JsModule {
  initialize?(ctx: unknown): Promise<void> | void;
  execute(requests: JsRequest[]): Promise<JsResult[] | void>;
  finalize?(): Promise<void> | void;
}

class JsInstance implements ExecutionInstance {
  /** Decoupled requests whose model holds their response sender past execute(): ended with an error at unload. */
  readonly open = new Set<DecoupledSender>();

  constructor(
    readonly name: string,
    private readonly mod: JsModule,
    private readonly ctx: BackendContext,
  ) {}

  async execute(requests: InferRequest[]): Promise<ExecuteResult> {
    const t0 = process.hrtime.bigint();
    const { config } = this.ctx;
    const decoupled = isDecoupled(config);
    const streams = decoupled
      ? requests.map((r) => new DecoupledSender(r, String(this.ctx.version), (res) => this.toResponse(r, res)))
      : [];
    // Each request also carries the batch's batch_input tensors (ragged-requests.ts).
    const extra = requestBatchInputs(config, requests);
    const jsReqs: JsRequest[] = requests.map((r, i) => ({
      inputs: Object.fromEntries([...r.inputs, ...extra].map((t) => [t.name, { datatype: t.datatype, shape: t.shape, data: t.data }])),
      requestedOutputs: r.outputs.length ? r.outputs.map((o) => o.name) : config.output.map((o) => o.name),
      parameters: r.parameters as Record<string, unknown>,
      signal: r.signal ?? NEVER,
      send: decoupled ? (res) => streams[i]!.send(res) : undefined,
      responseSender: decoupled ? () => streams[i]!.responseSender() : undefined,
    }));
    const t1 = process.hrtime.bigint();
    let results: JsResult[] | void;
    try {
      results = await this.mod.execute(jsReqs);
    } catch (err) {
      const e = internal(`js model '${this.ctx.modelName}' failed: ${(err as Error).message}`, err);
      for (const s of streams) s.fail(e);
      return {
        responses: requests.map(() => e),
        timing: { computeInputNs: Number(t1 - t0), computeInferNs: Number(process.hrtime.bigint() - t1), computeOutputNs: 0 },
      };
    }
    const t2 = process.hrtime.bigint();
    const timing = () => ({
      computeInputNs: Number(t1 - t0),
      computeInferNs: Number(t2 - t1),
      computeOutputNs: Number(process.hrtime.bigint() - t2),
    });
    if (!decoupled) {
      const responses = requests.map((r, i) => this.toResponse(r, results?.[i]));
      return { responses: scatterRequestOutputs(config, requests, responses), timing: timing() };
    }
    const stillOpen = streams.filter((s) => s.executeReturned());
    const outcomes = Promise.all(streams.map((s) => s.ended));
    if (!stillOpen.length) return { responses: await outcomes, timing: timing() };
    // Free for the next batch now (Triton's repeat backend releases its requests so); the batch settles as they end.
    for (const s of stillOpen) {
      this.open.add(s);
      void s.ended.then(() => this.open.delete(s));
    }
    return { responses: [], timing: timing(), streams: outcomes };
  }

  private toResponse(r: InferRequest, res: JsResult | undefined): InferResponse | StatusError {
    const model = this.ctx.modelName;
    if (!res) return internal(`js model '${model}' returned no response for a request`);
    if ('error' in res) {
      const code: StatusCode = isStatusCode(res.error.code) ? res.error.code : 'INTERNAL';
      return new StatusError(code, res.error.message);
    }
    // batch_output targets pass whatever was asked: the batch's first response carries the whole batch's (ragged-requests.ts).
    const all = this.ctx.config.output.map((o) => o.name);
    const targets = isDecoupled(this.ctx.config) ? [] : batchOutputTargets(this.ctx.config);
    const want = r.outputs.length ? [...new Set([...r.outputs.map((o) => o.name), ...targets])] : all;
    const outputs = [];
    for (const name of want) {
      // As Triton's python backend: only the wanted outputs go back, and one the model left out is just absent.
      const o = res.outputs[name];
      if (!o) continue;
      const decl = this.ctx.config.output.find((x) => x.name === name);
      const datatype: Datatype = o.datatype && isDatatype(o.datatype) ? o.datatype : fromConfigType(decl?.data_type ?? 'TYPE_UINT8');
      const d = o.data;
      outputs.push({ name, datatype, shape: o.shape, data: new Uint8Array(d.buffer, d.byteOffset, d.byteLength) });
    }
    return { modelName: model, modelVersion: String(this.ctx.version), id: r.id, outputs };
  }
}

/** A signal that never fires, for requests without one. */
const NEVER: CancelSignal = new RequestCancel();

function modelFile(ctx: BackendContext): string {
  const names = ctx.config.default_model_filename ? [ctx.config.default_model_filename] : ['model.js', 'model.ts', 'model.mjs'];
  const file = findModelFile(ctx.versionDir, names);
  if (!file) throw invalidArg(`model '${ctx.modelName}' version ${ctx.version}: no ${names.join(' or ')} in ${ctx.versionDir}`);
  return file;
}

/** A call a JS model makes on another model of the engine (like Triton's BLS). */
export interface JsInferCall {
  model: string;
  version?: string;
  inputs: Array<{ name: string; datatype: string; shape: number[]; data: ArrayBufferView }>;
  /** Empty or absent: every output. */
  outputs?: string[];
}

/** ctx.infer for JS models: plain tensors in and out; a failure rejects with a StatusError (its `code` says which). */
function jsInfer(ctx: BackendContext): (call: JsInferCall) => Promise<{ outputs: Record<string, JsTensor> }> {
  return async (call) => {
    const res = await ctx.infer({
      modelName: call.model,
      modelVersion: call.version ?? '',
      inputs: call.inputs.map((t) => {
        if (!isDatatype(t.datatype)) throw invalidArg(`model '${ctx.modelName}': infer on '${call.model}': unknown datatype ${t.datatype}`);
        const d = t.data;
        return { name: t.name, datatype: t.datatype, shape: t.shape, data: new Uint8Array(d.buffer, d.byteOffset, d.byteLength) };
      }),
      outputs: (call.outputs ?? []).map((name) => ({ name })),
      parameters: {},
    });
    return { outputs: Object.fromEntries(res.outputs.map((o) => [o.name, { datatype: o.datatype, shape: o.shape, data: o.data }])) };
  };
}

export const jsBackend: Backend = {
  name: 'js',
  defaultModelFilename: ['model.js', 'model.ts'],
  async load(ctx: BackendContext): Promise<BackendModel> {
    const file = modelFile(ctx);
    const instances: JsInstance[] = [];
    const mods: JsModule[] = [];
    const groups = ctx.config.instance_group ?? [{ name: ctx.modelName, kind: 'KIND_CPU', count: 1 }];
    // Bundled once per load (a reload reads the file anew), evaluated once per instance so module
    // state is per instance; see js-module-loader.ts for where bare imports resolve from.
    let source;
    try {
      source = await bundleModelFile(file);
    } catch (err) {
      throw invalidArg(`model '${ctx.modelName}': cannot import ${path.basename(file)}: ${(err as Error).message}`);
    }
    const infer = jsInfer(ctx);
    for (const g of groups) {
      for (let i = 0; i < g.count; i++) {
        const name = `${g.name}_${i}`;
        let mod: JsModule;
        try {
          mod = evaluateModel(source) as unknown as JsModule;
        } catch (err) {
          throw invalidArg(`model '${ctx.modelName}': cannot import ${path.basename(file)}: ${(err as Error).message}`);
        }
        if (typeof mod.execute !== 'function') throw invalidArg(`model '${ctx.modelName}': ${path.basename(file)} exports no execute()`);
        await mod.initialize?.({
          config: ctx.config,
          modelName: ctx.modelName,
          version: String(ctx.version),
          modelDir: ctx.modelDir,
          instanceName: name,
          infer,
        });
        mods.push(mod);
        instances.push(new JsInstance(name, mod, ctx));
      }
    }
    return {
      instances,
      finalize: async () => {
        const gone = unavailable(`model '${ctx.modelName}' was unloaded while a request was still open`);
        for (const inst of instances) for (const s of inst.open) s.fail(gone);
        for (const m of mods) await m.finalize?.();
      },
    };
  },
};
