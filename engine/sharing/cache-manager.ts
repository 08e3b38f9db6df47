// Use of the response cache around a model's scheduler (Triton's
// cache_manager + the cache lookup in InferenceRequest): decides once per
// model whether it may be cached, and per request looks up before enqueue and
// inserts after a successful execution. Hits never reach the scheduler, so
// they leave the model's execution and inference counts alone. A value read
// back is checked against the model's config like a model's own response
// (api/output-check.ts): one that does not fit (a Redis entry anyone on that
// Redis can write) is deleted and the request runs the model.
import type { InferRequest, InferResponse } from '../api/infer-request.ts';
import type { ModelConfig } from '../api/model-config.ts';
import type { ModelStatistics } from '../api/model-statistics.ts';
import { cacheKey, decodeTensors, encodeTensors } from './response-cache-codec.ts';
import type { ResponseCacheStore } from './response-cache.ts';
import { log, tracer } from '../../common/logger.ts';
import { isDecoupled } from '../api/decoupled.ts';
import { EVERY_CHECK, checkOutputs, requestBatch } from '../api/output-check.ts';
import { cacheIdentity, type IdentifiedVersion, type VersionLookup } from './cache-identity.ts';

const trace = tracer('cache');

/** Models whose answer may depend on more than the request's tensors are never cached. */
function stateless(c: ModelConfig | undefined): boolean {
  if (!c) return false;
  return !isDecoupled(c) && c.sequence_batching === undefined;
}

/**
 * Whether a model's responses go through the cache: its config enables
 * response_cache and it is neither decoupled nor a sequence model; an ensemble
 * additionally needs every step's model to be stateless in that sense.
 */
export function modelCacheable(config: ModelConfig, lookupConfig: (name: string, version: number) => ModelConfig | undefined): boolean {
  if (config.response_cache?.enable !== true || !stateless(config)) return false;
  if (config.platform !== 'ensemble') return true;
  return (config.ensemble_scheduling?.step ?? []).every((s) => stateless(lookupConfig(s.model_name, s.model_version)));
}

/** A request is cached only when every output comes back in the response (none into a client's shm region). */
export function requestCacheable(req: InferRequest): boolean {
  return !req.outputs.some((o) => o.shm);
}

export class CacheManager {
  /** `lookup` finds the version an ensemble step runs on now (its identity is part of the ensemble's). */
  constructor(
    readonly store: ResponseCacheStore,
    private readonly lookup: VersionLookup,
  ) {}

  /**
   * Answer from the cache, or run the request and keep its response. Lookup
   * and insert time are the model's cache_hit / cache_miss durations.
   */
  async serve(
    model: IdentifiedVersion & { stats: ModelStatistics },
    req: InferRequest,
    run: () => Promise<InferResponse>,
  ): Promise<InferResponse> {
    const t0 = process.hrtime.bigint();
    const outputs0 = req.outputs.length ? req.outputs.map((o) => o.name) : model.config.output.map((o) => o.name);
    const key = cacheKey(model.name, model.version, cacheIdentity(model, this.lookup), req, outputs0);
    const hit = await this.store.get(key);
    const t1 = process.hrtime.bigint();
    const outputs = hit && this.fitting(model.config, req, key, hit, outputs0);
    if (outputs) {
      model.stats.cacheHit(Number(t1 - t0));
      model.stats.succeeded(Number(t1 - (req.arrivalNs ?? t0)));
      trace(`hit for '${model.name}' v${model.version}`, req.id);
      return { modelName: model.name, modelVersion: String(model.version), id: req.id, outputs };
    }
    const res = await run();
    const t2 = process.hrtime.bigint();
    // Only what a read would accept is kept (a model's answer need not fit its config: see output-check.ts).
    if (
      !res.outputs.some((o) => o.shm) &&
      !checkOutputs(model.config, res.outputs, outputs0, requestBatch(model.config, req), EVERY_CHECK)
    ) {
      void this.store.set(key, encodeTensors(res.outputs));
    }
    model.stats.cacheMiss(Number(t1 - t0) + Number(process.hrtime.bigint() - t2));
    return res;
  }

  /** The entry's tensors when they decode and fit the model's config; otherwise the entry is discarded. */
  private fitting(config: ModelConfig, req: InferRequest, key: string, bytes: Uint8Array, wanted: readonly string[]) {
    const tensors = decodeTensors(bytes);
    const problem = tensors ? checkOutputs(config, tensors, wanted, requestBatch(config, req), EVERY_CHECK) : undefined;
    if (tensors && !problem) return tensors;
    log.warn(
      `response cache: discarding an entry for model '${config.name}' that ${problem ? `does not fit its config: ${problem.message}` : 'does not decode'}`,
    );
    void this.store.discard(key);
    return undefined;
  }

  close(): Promise<void> {
    return this.store.close();
  }
}
