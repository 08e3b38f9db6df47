// Triton's default scheduler (a model without dynamic batching): every
// request runs alone, FIFO, on the next free instance. As in Triton it is the
// dynamic batch scheduler with batching off (dynamic-batch-scheduler.ts); this
// name stays for callers that build one directly.
import type { InstancePool } from './instance-pool.ts';
import type { ModelConfig } from '../api/model-config.ts';
import type { StatsSink } from '../api/scheduler.ts';
import type { Clock } from './scheduler-queue.ts';
import { DynamicBatchScheduler } from './dynamic-batch-scheduler.ts';

export type { Clock } from './scheduler-queue.ts';

export interface DefaultSchedulerOptions {
  modelName: string;
  pool: InstancePool;
  stats: StatsSink;
  clock?: Clock;
  /** The model's max_batch_size, only to report each execution's batch size; default 0 (size 1). */
  maxBatchSize?: number;
}

/** The dynamic batch scheduler with batching off. */
export class DefaultScheduler extends DynamicBatchScheduler {
  constructor(opts: DefaultSchedulerOptions) {
    const config = { max_batch_size: opts.maxBatchSize ?? 0, input: [] } as unknown as ModelConfig;
    super({ modelName: opts.modelName, config, pool: opts.pool, stats: opts.stats, clock: opts.clock, batching: false });
  }
}
