// Loading one version of a model (the per-version half of Triton's
// model_lifecycle): normalize its config, have the backend build its
// instances, pick its scheduler and run warmup. The repository manager calls
// it under the model's load lock; on failure nothing of the version is left.
import fs from 'node:fs';
import path from 'node:path';
import type { ModelConfig } from '../api/model-config.ts';
import { backendFor, type BackendContext } from '../api/backend.ts';
import { ModelVersion } from './model-lifecycle.ts';
import { ModelStatistics } from '../api/model-statistics.ts';
import { InstancePool } from '../scheduling/instance-pool.ts';
import { DynamicBatchScheduler } from '../scheduling/dynamic-batch-scheduler.ts';
import { SequenceBatchScheduler } from '../scheduling/sequence-batch-scheduler.ts';
import type { Scheduler } from '../api/scheduler.ts';
import { runSyntheticWarmup, runWarmup } from './model-warmup.ts';
import type { RateLimiter } from '../sharing/rate-limiter.ts';
import { loadModelConfig, type ConfigSource } from '../config/model-config-loader.ts';
import { checkInstanceCount, type InstanceCheck } from './instance-limits.ts';
import { INITIAL_STATE_DIR, initialStateFiles } from '../config/sequence-config.ts';
import { log, tracer } from '../../common/logger.ts';
import { fingerprintVersion } from './version-fingerprint.ts';

const trace = tracer('repository');

/** What a version needs from the engine around it. */
export type VersionLoadDeps = Pick<BackendContext, 'infer' | 'modelControl' | 'lookupConfig' | 'backendConfig'> & {
  /** --rate-limit=execution_count: instances execute only while their resources are free. */
  rateLimiter?: RateLimiter;
  /** Fingerprint the version's files and config before the backend reads them (the response cache keys on it). */
  fingerprint?: boolean;
  /** Under a memory budget: warm a model without model_warmup on every instance at its largest batch before it is measured. */
  warmForBudget?: boolean;
  /** Under a memory budget: the bytes it charges the model (statistics memory_usage shows them, not the backend's guess). */
  chargedBytes?: () => number;
  /** The instance bounds and what the other models hold (instance-limits.ts), checked before the backend loads. */
  instances?: () => InstanceCheck;
};

/** Load, schedule and warm up version `version`; returns it READY or throws (backend finalized). */
export async function loadModelVersion(src: ConfigSource, raw: ModelConfig, version: number, deps: VersionLoadDeps): Promise<ModelVersion> {
  const versionDir = path.join(src.modelDir, String(version));
  log.info(`loading: ${src.modelName}:${version}`);
  const config = loadModelConfig(src, raw, versionDir);
  if (deps.instances) checkInstanceCount(config, `${src.modelName}/config.pbtxt`, versionDir, deps.instances());
  const identity = deps.fingerprint ? await fingerprintOrNone(src.modelDir, versionDir, config) : undefined;
  const backend = backendFor(config);
  const tBackend = process.hrtime.bigint();
  const bm = await backend.load({
    modelName: src.modelName,
    version,
    modelDir: src.modelDir,
    versionDir,
    config,
    infer: deps.infer,
    modelControl: deps.modelControl,
    lookupConfig: deps.lookupConfig,
    backendConfig: deps.backendConfig,
    memoryBudgetBytes: deps.instances?.().budgetBytes,
  });
  const backendNs = Number(process.hrtime.bigint() - tBackend);
  const stats = new ModelStatistics(src.modelName, String(version), deps.chargedBytes ?? (() => bm.memoryBytes?.() ?? 0));
  let scheduler: Scheduler;
  let limited: ReturnType<RateLimiter['register']> | undefined;
  let pool: InstancePool | undefined;
  if (bm.createScheduler) scheduler = bm.createScheduler(stats);
  else {
    try {
      limited = deps.rateLimiter?.register(src.modelName, config, bm.instances);
    } catch (err) {
      await bm.finalize();
      throw err;
    }
    const instances = limited?.instances ?? bm.instances;
    if (config.sequence_batching) {
      // Its own pool: adaptive instance counts (mv.pool) leave sequence models alone.
      const initialStates = new Map<string, Uint8Array>();
      for (const f of initialStateFiles(config)) {
        const bytes = readInitialState(src.modelDir, f);
        if (bytes) initialStates.set(f, bytes);
      }
      scheduler = new SequenceBatchScheduler({ modelName: src.modelName, config, pool: new InstancePool(instances), stats, initialStates });
    } else {
      pool = new InstancePool(instances);
      // One scheduler class: batching on with dynamic_batching and max_batch_size > 0, else Triton's default scheduler.
      scheduler = new DynamicBatchScheduler({ modelName: src.modelName, config, pool, stats });
    }
  }
  const mv = new ModelVersion(src.modelName, version, config, bm, scheduler, stats);
  mv.identity = identity;
  if (limited) mv.onUnloaded.push(limited.unregister);
  mv.pool = pool;
  mv.setState('LOADING');
  const tWarmup = process.hrtime.bigint();
  try {
    await runWarmup(config, scheduler, src.modelDir);
    if (deps.warmForBudget && config.backend !== 'python') await runSyntheticWarmup(config, bm.instances);
  } catch (err) {
    mv.setState('UNAVAILABLE', (err as Error).message);
    await scheduler.stop();
    await bm.finalize();
    limited?.unregister();
    throw err;
  }
  mv.loadTimings = { backendNs, warmupNs: Number(process.hrtime.bigint() - tWarmup) };
  mv.setState('READY');
  trace(`${src.modelName}:${version} ready with ${bm.instances.length} instance(s)`);
  return mv;
}

/** The version's fingerprint; none (the cache then keys it to this load alone) when its files cannot be read. */
async function fingerprintOrNone(modelDir: string, versionDir: string, config: ModelConfig): Promise<string | undefined> {
  try {
    return await fingerprintVersion(modelDir, versionDir, config);
  } catch (err) {
    log.warn(
      `model '${config.name}': cannot fingerprint its files for the response cache (${(err as Error).message}); its entries last for this load only`,
    );
    return undefined;
  }
}

/** An implicit state's initial_state data_file, read whole from the model's initial_state/ folder (undefined: unreadable, named by the scheduler's check). */
function readInitialState(modelDir: string, file: string): Uint8Array | undefined {
  try {
    return new Uint8Array(fs.readFileSync(path.join(modelDir, INITIAL_STATE_DIR, file)));
  } catch {
    // Unreadable: the sequence batcher's check fails the load naming the file (sequence-config.ts).
    return undefined;
  }
}
