// The request pipeline (Triton's InferenceRequest path through the server
// core), one named step after another: shm inputs and output regions (held
// from the start), on-demand load, validate, trace, cache or enqueue, order
// outputs, classify, shm outputs, release.
// run() is a client's request; runOnModel() is also where ensemble steps
// and BLS calls enter. Hot path: no allocation beyond what a request needs
// (one closure for the trace, one for the scheduler's answer); main thread.
import path from 'node:path';
import type { InferRequest, InferResponse } from '../api/infer-request.ts';
import type { ModelRepositoryManager, ControlMode } from '../repository/model-repository-manager.ts';
import type { SharedMemoryManager, ShmAcquired } from '../shm/shared-memory-manager.ts';
import type { ModelVersion } from '../api/model-version.ts';
import type { TraceManager } from '../tracing/trace-manager.ts';
import type { MemoryBudget } from '../sharing/model-memory-budget.ts';
import type { MemoryRelease } from '../sharing/memory-release.ts';
import { modelCacheable, requestCacheable, type CacheManager } from '../sharing/cache-manager.ts';
import { readyOnDemand } from '../sharing/on-demand-loading.ts';
import { resolveRawInput } from './raw-input.ts';
import { validateRequest } from './infer-validation.ts';
import { classify } from './classification.ts';
import { checkedResponse, checkStreamedResponses } from './response-check.ts';
import { applyReshape, reshapeResponse } from './reshape-step.ts';
import { isDecoupled } from '../api/decoupled.ts';
import { cancelled, invalidArg, unsupported } from '../api/status.ts';

export interface InferPipelineDeps {
  repository: ModelRepositoryManager;
  shm: SharedMemoryManager;
  tracing: TraceManager;
  cache: CacheManager | undefined;
  budget: MemoryBudget | undefined;
  memoryRelease: MemoryRelease;
  /** The model repository's folder (classification labels files). */
  modelRepository: string;
  controlMode: ControlMode | undefined;
  onDemandTimeoutMs: number;
  /** Tell every backend to drop its worker mappings of these shm keys. */
  forgetInBackends(keys: string[]): void;
}

export class InferPipeline {
  private readonly cacheable = new WeakMap<ModelVersion, boolean>();

  constructor(private readonly d: InferPipelineDeps) {}

  /** A client's request, from its shm inputs to its shm outputs; regions stay held until the execution ends. */
  async run(req: InferRequest): Promise<InferResponse> {
    const inlineBytes = inlineBytesOf(req);
    const held: ShmAcquired[] = [];
    try {
      this.acquireShmInputs(req, held);
      const outRegions = this.acquireShmOutputs(req, held);
      const res = await this.runOnModel(req);
      checkHeldInputs(held);
      refuseIfAbandoned(req);
      this.classifyOutputs(req, res);
      this.writeShmOutputs(req, res, outRegions);
      return res;
    } finally {
      this.release(held, inlineBytes);
    }
  }

  /**
   * Step 2 on: on-demand load, then the model's own steps (3 to 6: validate,
   * trace, answer from the cache or the model's scheduler, order the
   * outputs); the budget never evicts the model meanwhile. One async frame
   * for all of them: each frame is a promise and a hop per request.
   */
  async runOnModel(req: InferRequest): Promise<InferResponse> {
    req.arrivalNs ??= process.hrtime.bigint();
    // Step 2, on-demand: in on-demand mode the model is loaded first (the only await before begin).
    const mv =
      this.d.controlMode === 'on-demand'
        ? await readyOnDemand(this.d.repository, req, this.d.onDemandTimeoutMs)
        : this.d.repository.get(req.modelName, req.modelVersion);
    // In use from here to the answer (no await between the lookup and begin).
    this.d.budget?.begin(req.modelName);
    try {
      validateFor(mv, req);
      let res: InferResponse;
      try {
        res = await this.d.tracing.traced(req, String(mv.version), () => this.cacheOrEnqueue(mv, req));
      } finally {
        // Its client went away (queued and dropped, or stopped while it ran): a cancellation in the statistics.
        if (req.clientSignal?.aborted) mv.stats.cancelled(Number(process.hrtime.bigint() - req.arrivalNs!));
      }
      orderOutputs(req, res);
      return res;
    } finally {
      this.d.budget?.end(req.modelName);
    }
  }

  /** Step 1, shm inputs: each shm input views its region (held in `held` until release). */
  private acquireShmInputs(req: InferRequest, held: ShmAcquired[]): void {
    for (const t of req.inputs) {
      if (!t.shm) continue;
      if (t.data.byteLength) throw invalidArg(`input '${t.name}' has both shared memory parameters and data`);
      const a = this.d.shm.acquire(t.shm, { tensor: t.name, kind: 'input' });
      held.push(a);
      t.data = a.bytes;
      t.shmLocation = {
        key: a.key,
        offset: a.absoluteOffset,
        byteSize: t.shm.byteSize,
        regionOffset: a.regionOffset,
        regionSize: a.regionSize,
        fd: a.fd,
      };
      t.shmCheck = a.check;
    }
  }

  /**
   * Step 1, shm outputs: each output region is checked and held from the
   * start, as Triton does (an unregister meanwhile waits for this request).
   */
  private acquireShmOutputs(req: InferRequest, held: ShmAcquired[]): ReadonlyMap<string, ShmAcquired> | undefined {
    let regions: Map<string, ShmAcquired> | undefined;
    for (const o of req.outputs) {
      if (!o.shm) continue;
      const a = this.d.shm.acquire(o.shm, { tensor: o.name, kind: 'output' });
      held.push(a);
      (regions ??= new Map()).set(o.name, a);
    }
    return regions;
  }

  /** Step 5, cache or enqueue: the response cache when the model and request allow it, else the scheduler. */
  private cacheOrEnqueue(mv: ModelVersion, req: InferRequest): Promise<InferResponse> {
    if (this.usesCache(mv, req)) return this.d.cache!.serve(mv, req, () => enqueue(mv, req));
    return enqueue(mv, req);
  }

  private usesCache(mv: ModelVersion, req: InferRequest): boolean {
    if (!this.d.cache || !requestCacheable(req)) return false;
    let ok = this.cacheable.get(mv);
    if (ok === undefined) this.cacheable.set(mv, (ok = modelCacheable(mv.config, (n, v) => this.d.repository.readyVersion(n, v)?.config)));
    return ok;
  }

  /** Step 7, classify: outputs asked for with `classification: k` become their top-k as BYTES. */
  private classifyOutputs(req: InferRequest, res: InferResponse): void {
    if (!req.outputs.some((o) => o.classification)) return;
    const mv = this.d.repository.get(res.modelName, res.modelVersion);
    for (const o of req.outputs) {
      if (!o.classification) continue;
      const i = res.outputs.findIndex((t) => t.name === o.name);
      if (i >= 0)
        res.outputs[i] = classify(
          res.outputs[i]!,
          o.classification,
          mv.config,
          path.join(this.d.modelRepository, res.modelName),
          this.labelLookup,
        );
    }
  }

  /** Composing models' configs and folders: an ensemble output's labels come from the step that writes it. */
  private readonly labelLookup = (name: string, version: number) => {
    const v = this.d.repository.readyVersion(name, version >= 0 ? version : undefined);
    return v ? { config: v.config, dir: path.join(this.d.modelRepository, name) } : undefined;
  };

  /** Step 8, shm outputs: outputs asked for in a region are copied into the region held since step 1 and answered as a reference. */
  private writeShmOutputs(req: InferRequest, res: InferResponse, regions: ReadonlyMap<string, ShmAcquired> | undefined): void {
    if (!regions) return;
    for (const o of req.outputs) {
      const a = regions.get(o.name);
      if (!o.shm || !a) continue;
      const out = res.outputs.find((t) => t.name === o.name);
      if (!out || out.shm) continue;
      if (out.data.byteLength > o.shm.byteSize) {
        throw invalidArg(
          `shared memory size specified with the request for output '${o.name}' should be at least ${out.data.byteLength} bytes to hold the results`,
        );
      }
      a.bytes.set(out.data);
      // Truncated during the copy: the bytes went to the guard's page, not to the client.
      const problem = a.check();
      if (problem) throw problem;
      out.shm = { region: o.shm.region, offset: o.shm.offset, byteSize: out.data.byteLength };
      out.data = new Uint8Array(0);
    }
  }

  /** Step 9, release: the input regions, and large inline requests' memory. */
  private release(held: ShmAcquired[], inlineBytes: number): void {
    this.d.memoryRelease.note(inlineBytes);
    for (const a of held) a.release();
    // A worker may have mapped a region again after its unregister's forget
    // (this request was still queued then): drop those mappings now.
    if (held.some((a) => a.unregistered)) {
      const live = new Set(this.d.shm.status().map((r) => r.key));
      this.d.forgetInBackends([...new Set(held.map((a) => a.key))].filter((k) => !live.has(k)));
    }
  }
}

function inlineBytesOf(req: InferRequest): number {
  let n = 0;
  for (const t of req.inputs) n += t.data.byteLength;
  return n;
}

/** Step 3, validate: against the model's config (a refusal counts as a failed request of the model). */
function validateFor(mv: ModelVersion, req: InferRequest): void {
  if (req.unaryOnly !== undefined && isDecoupled(mv.config)) throw unsupported(req.unaryOnly);
  try {
    if (req.rawInput) resolveRawInput(mv.config, req);
    validateRequest(mv.config, req);
  } catch (err) {
    mv.stats.failed(Number(process.hrtime.bigint() - req.arrivalNs!));
    throw err;
  }
  // What the model answers is checked against its config before it is cached or sent (response-check.ts),
  // after `reshape` turned it back into the config's dims (the backend sees the inputs reshaped; reshape-step.ts).
  checkStreamedResponses(mv.config, req);
  applyReshape(mv.config, req);
}

/** The model's scheduler, its answer in the config's dims and checked against the config. */
function enqueue(mv: ModelVersion, req: InferRequest): Promise<InferResponse> {
  return mv.scheduler.enqueue(req).then((r) => checkedResponse(mv.config, req, reshapeResponse(mv.config, r)));
}

/** Step 6, order outputs: in the order asked for, else the config's order. */
function orderOutputs(req: InferRequest, res: InferResponse): void {
  if (req.outputs.length <= 1) return;
  const order = new Map(req.outputs.map((o, i) => [o.name, i]));
  res.outputs.sort((a, b) => (order.get(a.name) ?? 0) - (order.get(b.name) ?? 0));
}

/** An input region truncated while the request waited or ran reads as zeros (the SIGBUS guard's page): never answer from it. */
function checkHeldInputs(held: ShmAcquired[]): void {
  for (const a of held) {
    const problem = a.check();
    if (problem) throw problem;
  }
}

/** Abandoned (deadline passed, client gone): its outputs go nowhere, least of all into a client's region. */
function refuseIfAbandoned(req: InferRequest): void {
  if (req.signal?.aborted) throw cancelled(`request for model '${req.modelName}' was cancelled`);
}
