// The ensemble scheduler (Triton's EnsembleScheduler): runs an ensemble's DAG
// in-process, one EnsembleRun per request (ensemble-run.ts: steps start as
// their inputs appear; a decoupled step's responses each run the steps
// downstream and stream out). In-flight count, stop and answering are the
// SchedulerCore's; main thread.
import type { InferRequest, InferResponse } from '../api/infer-request.ts';
import type { Scheduler } from '../api/scheduler.ts';
import type { ModelStatistics } from '../api/model-statistics.ts';
import type { EnsemblePlan } from '../config/ensemble-utils.ts';
import { StatusError } from '../api/status.ts';
import { SchedulerCore } from './scheduler-core.ts';
import { EnsembleRun } from './ensemble-run.ts';

export class EnsembleScheduler implements Scheduler {
  private readonly core: SchedulerCore;

  constructor(
    private readonly plan: EnsemblePlan,
    private readonly infer: (r: InferRequest) => Promise<InferResponse>,
    private readonly stats: ModelStatistics,
    private readonly version: string,
  ) {
    this.core = new SchedulerCore({ refusal: `ensemble '${plan.name}' is not accepting requests (unloading)`, stats });
  }

  inflightCount(): number {
    return this.core.inflight;
  }

  stop(): Promise<void> {
    return this.core.stop();
  }

  enqueue(request: InferRequest): Promise<InferResponse> {
    const refused = this.core.refused();
    if (refused) return Promise.reject(refused);
    this.core.accept();
    const arrival = request.arrivalNs ?? this.core.clock.nowNs();
    return new Promise<InferResponse>((resolve, reject) => {
      const run = new EnsembleRun(this.plan, request, this.version, this.infer, ({ outcome, firstDispatch, sums }) => {
        if (!(outcome instanceof StatusError)) {
          const end = process.hrtime.bigint();
          const batch = this.plan.maxBatchSize > 0 ? (request.inputs[0]?.shape[0] ?? 1) : 1;
          // queue: arrival to the first step's start; compute: the steps' sums (with batch_stats).
          this.stats.queued(Number((firstDispatch ?? end) - arrival));
          this.stats.executed(batch, 1, sums);
          request.onExecuted?.(sums); // an ensemble that is itself a step passes its sums up
        }
        this.core.settle(arrival, outcome, resolve, reject);
      });
      run.start();
    });
  }
}
