// One traced request (Triton's InferenceTrace): its id, parent (the ensemble
// that sent it), the activity timestamps Triton names, and, at level
// TENSORS, its tensors. Built by the TraceManager when a request is sampled;
// the schedulers report through InferRequest.onExecuted and the server marks
// the end. Timestamps are process.hrtime ns (monotonic), always in order.
import type { Tensor } from './tensor.ts';

/** Time spent by one execution of a batch, in nanoseconds. */
export interface ExecutionTiming {
  computeInputNs: number;
  computeInferNs: number;
  computeOutputNs: number;
}

export type TraceActivity =
  | 'REQUEST_START'
  | 'QUEUE_START'
  | 'COMPUTE_START'
  | 'COMPUTE_INPUT_END'
  | 'COMPUTE_OUTPUT_START'
  | 'COMPUTE_END'
  | 'REQUEST_END';

export class RequestTrace {
  readonly timestamps: Array<{ name: TraceActivity; ns: bigint }> = [];
  readonly tensors: Array<{ activity: 'TENSOR_QUEUE_INPUT' | 'TENSOR_BACKEND_OUTPUT'; tensor: Tensor }> = [];
  failed = false;
  /** Traces of the steps this (ensemble) request sent. */
  children = 0;

  constructor(
    readonly id: number,
    readonly modelName: string,
    readonly modelVersion: string,
    readonly requestId: string | undefined,
    readonly parent: RequestTrace | undefined,
    /** An incoming W3C traceparent (only for a top-level request). */
    readonly traceparent: string | undefined,
    readonly withTensors: boolean,
  ) {
    if (parent) parent.children++;
  }

  /** Record an activity at `ns`, never earlier than the last one (the file's order holds). */
  mark(name: TraceActivity, ns: bigint = process.hrtime.bigint()): void {
    const last = this.timestamps[this.timestamps.length - 1]?.ns;
    this.timestamps.push({ name, ns: last !== undefined && ns < last ? last : ns });
  }

  /** An execution finished now, with these durations: the compute activities, back-dated. */
  executed(t: ExecutionTiming, endNs: bigint = process.hrtime.bigint()): void {
    const total = BigInt(Math.max(0, Math.round(t.computeInputNs + t.computeInferNs + t.computeOutputNs)));
    const start = endNs - total;
    this.mark('COMPUTE_START', start);
    this.mark('COMPUTE_INPUT_END', start + BigInt(Math.round(t.computeInputNs)));
    this.mark('COMPUTE_OUTPUT_START', endNs - BigInt(Math.round(t.computeOutputNs)));
    this.mark('COMPUTE_END', endNs);
  }

  time(name: TraceActivity): bigint | undefined {
    return this.timestamps.find((t) => t.name === name)?.ns;
  }
}
