// The ensemble scheduler (Triton's EnsembleScheduler): runs an ensemble's DAG
// in-process. A step starts as soon as its inputs exist, independent steps run
// concurrently, each step is a request to the composing model's own scheduler
// (so it batches with direct calls), and tensors pass between steps by
// reference. In-flight count, stop and answering are the SchedulerCore's;
// main thread.
import type { InferRequest, InferResponse, Tensor } from '../api/infer-request.ts';
import type { Scheduler } from '../api/scheduler.ts';
import type { ModelStatistics } from '../api/model-statistics.ts';
import { nextReadySteps, type EnsemblePlan, type EnsemblePlanStep } from '../config/ensemble-utils.ts';
import { StatusError, internal, toStatusError } from '../api/status.ts';
import { SchedulerCore } from './scheduler-core.ts';
import { tracer } from '../../common/logger.ts';

const trace = tracer('ensemble');
const SEQUENCE_PARAMS = new Set(['sequence_id', 'sequence_start', 'sequence_end']);

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
      this.run(request, arrival).then(
        (res) => this.core.settle(arrival, res, resolve, reject),
        (err) => this.core.settle(arrival, toStatusError(err), resolve, reject),
      );
    });
  }

  private run(request: InferRequest, arrival: bigint): Promise<InferResponse> {
    const { plan } = this;
    const tensors = new Map<string, Tensor>(request.inputs.map((t) => [t.name, t]));
    const started = new Set<number>();
    let running = 0;
    let firstDispatch: bigint | undefined;
    let stepNs = 0;
    // Triton's ensemble statistics: compute times are the sums of its steps' executions.
    const sums = { computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0 };
    const onStepExecuted = (t: typeof sums) => {
      sums.computeInputNs += t.computeInputNs;
      sums.computeInferNs += t.computeInferNs;
      sums.computeOutputNs += t.computeOutputNs;
    };

    return new Promise<InferResponse>((resolve, reject) => {
      let failed = false;
      const finish = () => {
        const end = process.hrtime.bigint();
        const outputs = (request.outputs.length ? request.outputs.map((o) => o.name) : plan.outputs).map((name) => {
          const t = tensors.get(name);
          if (!t) throw internal(`ensemble '${plan.name}' produced no tensor '${name}'`);
          return { ...t, name };
        });
        const batch = plan.maxBatchSize > 0 ? (request.inputs[0]?.shape[0] ?? 1) : 1;
        // queue: arrival to the first step's start; compute: the steps' sums (with batch_stats).
        this.stats.queued(Number((firstDispatch ?? end) - arrival));
        this.stats.executed(batch, 1, sums);
        request.onExecuted?.(sums); // an ensemble that is itself a step passes its sums up
        trace(`'${plan.name}' done in ${(Number(end - arrival) / 1e6).toFixed(2)} ms (steps ${(stepNs / 1e6).toFixed(2)} ms)`, request.id);
        resolve({ modelName: plan.name, modelVersion: this.version, id: request.id, outputs });
      };
      const schedule = () => {
        if (failed) return;
        const avail = new Set(tensors.keys());
        const ready = nextReadySteps(plan, avail, started).filter((i) => plan.neededSteps.has(i));
        if (!ready.length && running === 0) {
          try {
            finish();
          } catch (err) {
            reject(err);
          }
          return;
        }
        for (const i of ready) {
          started.add(i);
          running++;
          firstDispatch ??= process.hrtime.bigint();
          const step = plan.steps[i]!;
          const t0 = process.hrtime.bigint();
          this.infer(this.stepRequest(step, request, tensors, onStepExecuted)).then(
            (res) => {
              stepNs += Number(process.hrtime.bigint() - t0);
              running--;
              for (const o of step.outputs) {
                const t = res.outputs.find((x) => x.name === o.modelOutput);
                if (!t) continue;
                tensors.set(o.tensor, {
                  name: o.tensor,
                  datatype: t.datatype,
                  shape: step.addBatchDim ? t.shape.slice(1) : t.shape,
                  data: t.data,
                });
              }
              schedule();
            },
            (err) => {
              if (failed) return;
              failed = true;
              const se = toStatusError(err);
              // Triton's text: the prefix, then the step's own message (clients match on the prefix).
              trace(`'${plan.name}' step ${i} (model '${step.modelName}') failed`, request.id);
              reject(new StatusError(se.code, `in ensemble '${plan.name}', ${se.message}`, se.detail));
            },
          );
        }
      };
      schedule();
    });
  }


  /** The request a step sends to its model: the ensemble's tensors under the model's input names, by reference. */
  private stepRequest(
    step: EnsemblePlanStep, parent: InferRequest, tensors: Map<string, Tensor>, onExecuted: InferRequest['onExecuted'],
  ): InferRequest {
    return {
      modelName: step.modelName,
      modelVersion: step.modelVersion >= 0 ? String(step.modelVersion) : undefined,
      id: parent.id,
      inputs: step.inputs.map((p) => {
        const t = tensors.get(p.tensor)!;
        return { name: p.modelInput, datatype: t.datatype, shape: step.addBatchDim ? [1, ...t.shape] : t.shape, data: t.data };
      }),
      outputs: step.neededOutputs.map((name) => ({ name })),
      // Triton hands an ensemble's correlation ID and sequence flags to its steps.
      parameters: Object.fromEntries(Object.entries(parent.parameters).filter(([k]) => SEQUENCE_PARAMS.has(k))),
      priority: parent.priority,
      timeoutUs: parent.timeoutUs,
      signal: parent.signal,
      onExecuted,
      parentTrace: parent.trace,
    };
  }
}
