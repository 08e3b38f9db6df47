// One ensemble request's run (Triton's EnsembleContext). A step starts as
// soon as its inputs exist, independent steps run concurrently, each step is a
// request to the composing model's own scheduler, and tensors pass between
// steps by reference.
//
// Decoupled steps (Triton's iterations): the request's inputs are one flow;
// each response of a decoupled step starts a flow of its own, holding that
// response's tensors, in which the steps downstream run again. The load-time
// check (config/ensemble-decoupled.ts) keeps a step's inputs, and the
// ensemble's outputs, within one flow. Every flow at the outputs' depth that
// completes the outputs is one response of the ensemble; they are sent in the
// order their flows began (a later one waits for an earlier one still
// running), and the last carries the final flag when no step is running
// any more. A flow's tensors are dropped once nothing more can run in it.
//
// A failed step (or an error response of a decoupled step) fails the
// ensemble at once with `in ensemble '<E>', <the step's message>`; in a
// decoupled ensemble the steps still running are then cancelled (their
// results could go nowhere). The client's cancellation reaches every step.
// Main thread only.
import type { InferRequest, InferResponse, Tensor } from '../api/infer-request.ts';
import { RequestCancel } from '../api/cancel-signal.ts';
import { nextReadySteps, type EnsemblePlan, type EnsemblePlanStep } from '../config/ensemble-utils.ts';
import { StatusError, internal, toStatusError } from '../api/status.ts';
import { tracer } from '../../common/logger.ts';

const trace = tracer('ensemble');

/** Compute times of the steps' executions, summed (Triton's ensemble statistics). */
export interface StepSums {
  computeInputNs: number;
  computeInferNs: number;
  computeOutputNs: number;
}

/** What a run reports when it ends: its answer (or streamEnd) or error, and its timings for the statistics. */
export interface RunEnd {
  outcome: InferResponse | StatusError;
  firstDispatch: bigint | undefined;
  sums: StepSums;
}

/** The tensors of one flow and the steps run in it (Triton's iteration count). */
interface Flow {
  /** '' for the request's inputs; '<parent>/<n>' for the n-th response of a decoupled step run in <parent>. */
  readonly key: string;
  /** Decoupled steps passed since the inputs. */
  readonly depth: number;
  readonly tensors: Map<string, Tensor>;
  readonly started: Set<number>;
  running: number;
  /** Responses of decoupled steps in it so far (names its child flows). */
  children: number;
  /** The ensemble's outputs, once complete in this flow. */
  answer?: InferResponse;
}

export class EnsembleRun {
  private readonly dirty: Flow[] = [];
  /** Flows at the outputs' depth, in the order they began, not yet answered or given up. */
  private readonly pending: Flow[] = [];
  private readonly wanted: string[];
  private readonly stream: boolean;
  private readonly stepSignal = new RequestCancel();
  private readonly abortSteps = () => this.stepSignal.abort();
  private running = 0;
  private pumping = false;
  private done = false;
  private responses = 0;
  private last: InferResponse | undefined;
  private missing: string | undefined;
  private firstDispatch: bigint | undefined;
  private stepNs = 0;
  private readonly sums: StepSums = { computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0 };
  private readonly onStepExecuted = (t: StepSums) => {
    this.sums.computeInputNs += t.computeInputNs;
    this.sums.computeInferNs += t.computeInferNs;
    this.sums.computeOutputNs += t.computeOutputNs;
  };

  constructor(
    private readonly plan: EnsemblePlan,
    private readonly request: InferRequest,
    private readonly version: string,
    private readonly infer: (r: InferRequest) => Promise<InferResponse>,
    private readonly onEnd: (end: RunEnd) => void,
  ) {
    this.wanted = request.outputs.length ? request.outputs.map((o) => o.name) : plan.outputs;
    this.stream = plan.decoupled && request.onResponse !== undefined;
  }

  /** Run the steps; onEnd is called once. */
  start(): void {
    const signal = this.request.signal;
    if (signal?.aborted) this.stepSignal.abort();
    else signal?.addEventListener('abort', this.abortSteps);
    const root = this.flow('', 0, new Map(this.request.inputs.map((t) => [t.name, t])));
    this.pump(root);
  }

  private flow(key: string, depth: number, tensors: Map<string, Tensor>): Flow {
    const f: Flow = { key, depth, tensors, started: new Set(), running: 0, children: 0 };
    if (depth === this.plan.outputDepth) this.pending.push(f);
    return f;
  }

  /** Start what became ready in `changed` (and whatever that made ready), then send what can be sent. Re-entrant calls only queue. */
  private pump(changed: Flow): void {
    this.dirty.push(changed);
    if (this.pumping || this.done) return;
    this.pumping = true;
    try {
      for (let f = this.dirty.shift(); f && !this.done; f = this.dirty.shift()) this.advance(f);
    } finally {
      this.pumping = false;
    }
    if (!this.done) this.release();
  }

  private advance(f: Flow): void {
    const ready = nextReadySteps(this.plan, f.tensors, f.started).filter((i) => this.plan.neededSteps.has(i));
    for (const i of ready) this.startStep(f, i);
    if (!f.answer && f.depth === this.plan.outputDepth && this.wanted.every((n) => f.tensors.has(n))) {
      f.answer = {
        modelName: this.plan.name,
        modelVersion: this.version,
        id: this.request.id,
        outputs: this.wanted.map((name) => ({ ...f.tensors.get(name)!, name })),
      };
    }
    // Nothing runs in it and nothing can start: only a pending flow still needs its tensors (to say which is missing).
    if (f.running === 0 && f.depth !== this.plan.outputDepth) f.tensors.clear();
  }

  /** Send the answers of pending flows in order; end the run once no step is running. */
  private release(): void {
    const out: InferResponse[] = [];
    while (this.pending.length) {
      const f = this.pending[0]!;
      if (!f.answer && f.running > 0) break;
      this.pending.shift();
      if (f.answer) out.push(f.answer);
      else this.missing ??= this.wanted.find((n) => !f.tensors.has(n));
      f.tensors.clear();
    }
    const ending = this.running === 0;
    out.forEach((r, i) => this.deliver(r, ending && i === out.length - 1));
    if (ending) this.finish();
  }

  private deliver(r: InferResponse, final: boolean): void {
    this.responses++;
    if (this.stream) this.request.onResponse!(final ? { ...r, final: true } : r);
    else this.last = r;
  }

  private finish(): void {
    this.done = true;
    this.request.signal?.removeEventListener('abort', this.abortSteps);
    const { plan, request } = this;
    let outcome: InferResponse | StatusError;
    if (this.stream) outcome = { modelName: plan.name, modelVersion: this.version, id: request.id, outputs: [], streamEnd: true };
    else if (this.last) outcome = this.last;
    else if (plan.decoupled) outcome = internal(`decoupled ensemble '${plan.name}' sent no response`);
    else outcome = internal(`ensemble '${plan.name}' produced no tensor '${this.missing ?? this.wanted[0]}'`);
    trace(`'${plan.name}' done: ${this.responses} response(s), steps ${(this.stepNs / 1e6).toFixed(2)} ms`, request.id);
    this.onEnd({ outcome, firstDispatch: this.firstDispatch, sums: this.sums });
  }

  private fail(err: unknown, i: number): void {
    if (this.done) return;
    this.done = true;
    this.request.signal?.removeEventListener('abort', this.abortSteps);
    if (this.plan.decoupled) this.stepSignal.abort();
    const se = toStatusError(err);
    // Triton's text: the prefix, then the step's own message (clients match on the prefix).
    trace(`'${this.plan.name}' step ${i} (model '${this.plan.steps[i]!.modelName}') failed`, this.request.id);
    this.onEnd({
      outcome: new StatusError(se.code, `in ensemble '${this.plan.name}', ${se.message}`, se.detail),
      firstDispatch: this.firstDispatch,
      sums: this.sums,
    });
  }

  private startStep(f: Flow, i: number): void {
    const step = this.plan.steps[i]!;
    f.started.add(i);
    f.running++;
    this.running++;
    this.firstDispatch ??= process.hrtime.bigint();
    const t0 = process.hrtime.bigint();
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      f.running--;
      this.running--;
      this.stepNs += Number(process.hrtime.bigint() - t0);
    };
    const req = this.stepRequest(step, f);
    // Each response of a decoupled step is a flow of its own; one sent with the final flag ends the step.
    if (step.decoupled) {
      req.onResponse = (r) => {
        if (this.done || ended) return;
        if (r instanceof Error) return this.fail(r, i);
        const child = this.child(f, step, r);
        if (r.final) {
          end();
          this.dirty.push(f);
        }
        this.pump(child);
      };
    }
    let answer: Promise<InferResponse>;
    try {
      answer = this.infer(req);
    } catch (err) {
      answer = Promise.reject(err);
    }
    answer.then(
      (res) => {
        if (this.done) return;
        let changed = f;
        if (!res.streamEnd && step.decoupled) changed = this.child(f, step, res);
        else if (!res.streamEnd) for (const [name, t] of this.stepOutputs(step, res)) f.tensors.set(name, t);
        end();
        if (changed !== f) this.dirty.push(f);
        this.pump(changed);
      },
      (err) => {
        end();
        this.fail(err, i);
      },
    );
  }

  /** The flow one response of decoupled `step` (run in `f`) starts. */
  private child(f: Flow, step: EnsemblePlanStep, r: InferResponse): Flow {
    return this.flow(`${f.key}/${f.children++}`, f.depth + 1, new Map(this.stepOutputs(step, r)));
  }

  /** A step's outputs under their ensemble tensor names (an output the response lacks is left out). */
  private stepOutputs(step: EnsemblePlanStep, res: InferResponse): Array<[string, Tensor]> {
    const out: Array<[string, Tensor]> = [];
    for (const o of step.outputs) {
      const t = res.outputs.find((x) => x.name === o.modelOutput);
      if (!t) continue;
      out.push([o.tensor, { name: o.tensor, datatype: t.datatype, shape: step.addBatchDim ? t.shape.slice(1) : t.shape, data: t.data }]);
    }
    return out;
  }

  /** The request a step sends to its model: the flow's tensors under the model's input names, by reference. */
  private stepRequest(step: EnsemblePlanStep, f: Flow): InferRequest {
    const parent = this.request;
    return {
      modelName: step.modelName,
      modelVersion: step.modelVersion >= 0 ? String(step.modelVersion) : undefined,
      id: parent.id,
      inputs: step.inputs.map((p) => {
        const t = f.tensors.get(p.tensor)!;
        return { name: p.modelInput, datatype: t.datatype, shape: step.addBatchDim ? [1, ...t.shape] : t.shape, data: t.data };
      }),
      outputs: step.neededOutputs.map((name) => ({ name })),
      // Triton (since its ensemble scheduler's SetParameters) hands every
      // parameter of the ensemble's request to each step, the correlation ID
      // and sequence flags among them.
      parameters: { ...parent.parameters },
      priority: parent.priority,
      timeoutUs: parent.timeoutUs,
      signal: this.stepSignal,
      onExecuted: this.onStepExecuted,
      parentTrace: parent.trace,
    };
  }
}
