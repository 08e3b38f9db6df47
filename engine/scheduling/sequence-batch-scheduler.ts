// over 300 lines: one state machine (admission, both strategies, padding, implicit state, idle release); its decisions are in sequence-direct-batch.ts, dynamic-batch-decision.ts and sequence-slots.ts
// Triton's sequence batcher for stateful models. Requests carry a correlation
// ID (sequence_id) and START/END flags; each sequence's requests run one at a
// time, in order. Direct strategy: a sequence is pinned to one batch slot of
// one instance until it ends, and an instance runs its slots 0..k as one
// batch, idle slots padded with null requests (decideDirectBatch). Oldest strategy: up to max_candidate_sequences sequences compete
// and any free instance batches the oldest ready requests (decideBatch, as
// the dynamic batcher). The engine adds the configured control tensors and
// carries implicit state from a request's output to the next request's input.
// Owns its sequences, queues and timers; main thread only. Slot bookkeeping
// is sequence-slots.ts, the batch choice dynamic-batch-decision.ts, the
// instances an InstancePool, in-flight/stop/timers/answers the SchedulerCore.
import { batchShapeKey, decideBatch, type BatchPolicy, type PendingItem } from './dynamic-batch-decision.ts';
import { finalOutcomes, runOnInstance } from './instance-run.ts';
import { delaySchedulerFromEnv } from './dynamic-batch-scheduler.ts';
import { backlogDelayFromEnv, decideDirectBatch, schedulerHeld, type DirectPolicy } from './sequence-direct-batch.ts';
import type { InferRequest, InferResponse, Tensor } from '../api/infer-request.ts';
import type { ModelConfig } from '../api/model-config.ts';
import type { ExecutionInstance, Scheduler, StatsSink } from '../api/scheduler.ts';
import { requestBatchSize } from '../api/scheduler.ts';
import type { Clock } from './scheduler-queue.ts';
import { OneShotTimer, SchedulerCore } from './scheduler-core.ts';
import type { InstancePool } from './instance-pool.ts';
import { sequenceFlagsOf, sequenceKey, sequenceSpecOf, withSequenceInputs, type SequenceSpec } from '../config/sequence-config.ts';
import { SequenceSlots, type LiveSequence } from './sequence-slots.ts';
import { nullRequest } from './sequence-null-request.ts';
import { isDecoupled } from '../api/decoupled.ts';
import { cancelled, invalidArg, StatusError } from '../api/status.ts';
import { log, tracer } from '../../common/logger.ts';

const trace = tracer('sequence');
/** Shortest wait between idle checks. */
const IDLE_RECHECK_NS = 1_000_000n;

export interface SequenceBatchSchedulerOptions {
  modelName: string;
  config: ModelConfig;
  /** The model's instances; the sequence batcher never grows or shrinks it. */
  pool: InstancePool;
  stats: StatsSink;
  clock?: Clock;
  /** The bytes of each implicit state's initial_state data_file, by the name the config gives (the loader reads them). */
  initialStates?: ReadonlyMap<string, Uint8Array>;
  /** Test hook, Triton's TRITONSERVER_DELAY_SCHEDULER: start nothing until this many requests wait in slots (default: that variable). */
  delayUntilQueued?: number;
  /** Test hook, Triton's TRITONSERVER_BACKLOG_DELAY_SCHEDULER: ... and this many in the backlog (default: that variable). */
  delayUntilBacklogged?: number;
}

interface Pending {
  request: InferRequest;
  start: boolean;
  end: boolean;
  enqueuedNs: bigint;
  resolve: (r: InferResponse) => void;
  reject: (e: StatusError) => void;
}

interface SeqData {
  queue: Pending[];
  running: boolean;
  /** Implicit state: the last state outputs, by output name. */
  state: Map<string, Tensor>;
}

type Seq = LiveSequence<SeqData>;

export class SequenceBatchScheduler implements Scheduler {
  private readonly modelName: string;
  private readonly config: ModelConfig;
  private readonly spec: SequenceSpec;
  private readonly pool: InstancePool;
  private readonly instances: readonly ExecutionInstance[];
  private readonly stats: StatsSink;
  private readonly core: SchedulerCore;
  private readonly slots: SequenceSlots<SeqData>;
  private readonly policy: BatchPolicy;
  private readonly batchTimer: OneShotTimer;
  private readonly idleTimer: OneShotTimer;
  private readonly direct: DirectPolicy;
  /** The delay hooks' counts (requests in slots, in the backlog) until the first batch; undefined once released. */
  private hold: { slotted: number; backlogged: number } | undefined;

  constructor(opts: SequenceBatchSchedulerOptions) {
    this.modelName = opts.modelName;
    this.config = opts.config;
    this.spec = sequenceSpecOf(opts.config, undefined, opts.initialStates);
    this.pool = opts.pool;
    this.instances = opts.pool.instances;
    this.stats = opts.stats;
    this.core = new SchedulerCore({ refusal: `model '${opts.modelName}' is not accepting requests`, stats: opts.stats, clock: opts.clock });
    this.batchTimer = new OneShotTimer(this.core.clock, () => this.schedule());
    this.idleTimer = new OneShotTimer(this.core.clock, () => this.reapIdle());
    const perInstance = Math.max(1, opts.config.max_batch_size);
    this.slots =
      this.spec.strategy === 'direct'
        ? new SequenceSlots<SeqData>(
            this.instances.map(() => perInstance),
            true,
          )
        : new SequenceSlots<SeqData>([this.spec.maxCandidates], false);
    const hold = {
      slotted: opts.delayUntilQueued ?? delaySchedulerFromEnv(),
      backlogged: opts.delayUntilBacklogged ?? backlogDelayFromEnv(),
    };
    this.hold = hold.slotted > 0 || hold.backlogged > 0 ? hold : undefined;
    this.direct = { slotCount: perInstance, maxQueueDelayNs: this.spec.maxQueueDelayNs, minSlotUtilization: this.spec.minSlotUtilization };
    this.policy = {
      maxBatchSize: opts.config.max_batch_size,
      preferredSizes: this.spec.strategy === 'oldest' ? this.spec.preferredSizes : [],
      maxQueueDelayNs: this.spec.maxQueueDelayNs,
    };
  }

  inflightCount(): number {
    return this.core.inflight;
  }

  stop(): Promise<void> {
    const drained = this.core.stop();
    this.idleTimer.cancel();
    return drained;
  }

  enqueue(request: InferRequest): Promise<InferResponse> {
    const now = this.core.clock.nowNs();
    request.arrivalNs ??= now;
    const refused = this.core.refused();
    if (refused) return Promise.reject(refused);
    let seq: Seq;
    let flags;
    try {
      // Each request is one step of one sequence: a statically batched request cannot be (Triton's check and words).
      if (requestBatchSize(request, this.config.max_batch_size) > 1) {
        throw invalidArg(
          `inference request to model '${this.modelName}' must specify batch-size 1 due to requirements of sequence batcher`,
        );
      }
      flags = sequenceFlagsOf(request.parameters);
      if (flags.id === undefined) {
        throw invalidArg(`inference request to model '${this.modelName}' must specify a non-zero or non-empty correlation ID`);
      }
      const id = flags.id;
      const admission = this.slots.admit(id, sequenceKey(id), flags.start, flags.end, now, this.modelName, () => ({
        queue: [],
        running: false,
        state: new Map(),
      }));
      seq = admission.seq;
      if (admission.restarted) log.warn(`sequence ${id} for model '${this.modelName}' restarted by a new START before its END`);
    } catch (err) {
      this.stats.failed(Number(now - request.arrivalNs));
      return Promise.reject(err);
    }
    const { start, end } = flags;
    return new Promise<InferResponse>((resolve, reject) => {
      seq.data.queue.push({ request, start, end, enqueuedNs: now, resolve, reject });
      this.core.accept();
      this.schedule();
      // An enqueue only pushes idle deadlines later: an armed timer stays right.
      if (this.idleTimer.at === undefined) this.armIdleTimer();
    });
  }

  /** Start every batch that can start now; arm a timer for the earliest one that must wait. */
  private schedule(): void {
    if (this.held()) return;
    const now = this.core.clock.nowNs();
    let waitUntil: bigint | undefined;
    for (let i = 0; i < this.instances.length; i++) {
      if (!this.pool.isFree(this.instances[i]!)) continue;
      if (this.spec.strategy === 'direct') {
        const at = this.scheduleDirect(i, now);
        if (at !== undefined && (waitUntil === undefined || at < waitUntil)) waitUntil = at;
        continue;
      }
      const ready = this.slots
        .inSlots()
        .filter((s) => !s.data.running && s.data.queue.length > 0)
        .sort((a, b) => (a.data.queue[0]!.enqueuedNs < b.data.queue[0]!.enqueuedNs ? -1 : 1));
      if (!ready.length) continue;
      const items: PendingItem[] = ready.map((s) => ({
        batchSize: requestBatchSize(s.data.queue[0]!.request, this.config.max_batch_size),
        shapeKey: batchShapeKey(s.data.queue[0]!.request, this.config.max_batch_size),
        enqueuedNs: s.data.queue[0]!.enqueuedNs,
      }));
      const d = decideBatch(items, this.policy, now);
      if (d.action === 'send' && this.pool.claim(this.instances[i]!)) void this.run(i, ready.slice(0, d.count));
      else if (d.action === 'wait' && (waitUntil === undefined || d.untilNs < waitUntil)) waitUntil = d.untilNs;
    }
    if (waitUntil !== undefined) this.batchTimer.armBy(waitUntil, now);
  }

  /** The delay hooks hold the scheduler until enough requests wait (Triton counts slots' queues and the backlog apart). */
  private held(): boolean {
    if (!this.hold) return false;
    const waiting = (seqs: ReadonlyArray<Seq>) => seqs.reduce((n, s) => n + s.data.queue.length, 0);
    if (schedulerHeld(waiting(this.slots.inSlots()), waiting(this.slots.backlogged()), this.hold.slotted, this.hold.backlogged))
      return true;
    this.hold = undefined;
    return false;
  }

  /** Direct strategy on free instance `i`: run its slots as one padded batch, or say until when to wait. */
  private scheduleDirect(i: number, now: bigint): bigint | undefined {
    const bySlot: Array<Seq | undefined> = Array.from({ length: this.direct.slotCount });
    for (const s of this.slots.inSlots(i)) bySlot[s.slot!.index] = s;
    const views = bySlot.map((s) => {
      const head = s && !s.data.running ? s.data.queue[0] : undefined;
      if (!head) return { ready: false };
      return { ready: true, shapeKey: batchShapeKey(head.request, this.config.max_batch_size), enqueuedNs: head.enqueuedNs };
    });
    const d = decideDirectBatch(views, this.direct, now);
    if (d.action === 'wait') return d.untilNs;
    if (d.action === 'send' && this.pool.claim(this.instances[i]!))
      void this.run(
        i,
        d.slots.map((x, k) => (x === 'run' ? bySlot[k] : undefined)),
      );
    return undefined;
  }

  /** Run one batch: `seqs` in batch order, undefined for a slot padded with a null request (direct). */
  private async run(instanceIndex: number, seqs: Array<Seq | undefined>): Promise<void> {
    const instance = this.instances[instanceIndex]!;
    const now = this.core.clock.nowNs();
    const batched = this.config.max_batch_size > 0;
    const allOutputs = this.config.output.map((o) => o.name);
    const items: Array<{ seq: Seq; p: Pending; req: InferRequest } | undefined> = [];
    for (const seq of seqs) {
      if (!seq) {
        items.push(undefined);
        continue;
      }
      const p = seq.data.queue.shift()!;
      seq.data.running = true;
      if (p.request.signal?.aborted) {
        this.settle(seq, p, cancelled(`request for model '${this.modelName}' was cancelled`));
        items.push(undefined);
        continue;
      }
      this.stats.queued(Number(now - p.enqueuedNs));
      try {
        const req = withSequenceInputs(
          p.request,
          this.spec,
          { id: seq.id, start: p.start, end: p.end },
          seq.data.state,
          batched,
          allOutputs,
        );
        items.push({ seq, p, req });
      } catch (err) {
        this.settle(seq, p, err as StatusError);
        items.push(undefined);
      }
    }
    const real = items.filter((x) => x !== undefined);
    if (real.length) {
      // Padding keeps each sequence in its batch row (up to the highest slot with a request, as
      // Triton). A decoupled model is not padded: a null request's responses would have no reader.
      const batch = isDecoupled(this.config) ? real : items;
      const rep = real[0]!.p.request;
      const reqs = batch.map((x) => x?.req ?? nullRequest(rep, this.spec, batched, allOutputs));
      trace(`model '${this.modelName}' executing ${real.length} sequence request(s) (batch ${reqs.length}) on '${instance.name}'`, rep.id);
      const result = await runOnInstance(instance, reqs, this.modelName);
      if (result instanceof StatusError) {
        for (const x of real) this.settle(x.seq, x.p, result);
      } else {
        // Triton's batch statistics count the null requests in the batch size, not in the inference count.
        const size = (rs: InferRequest[]) => rs.reduce((n, r) => n + requestBatchSize(r, this.config.max_batch_size), 0);
        this.stats.executed(size(real.map((x) => x.p.request)), real.length, result.timing, size(reqs));
        // A decoupled sequence model keeps its instance until its streams end: the sequence's order holds.
        const outcomes = await finalOutcomes(result, reqs.length, instance.name, this.modelName);
        batch.forEach((x, k) => {
          if (!x) return;
          x.p.request.onExecuted?.(result.timing);
          this.settle(x.seq, x.p, this.keepState(x.seq, x.p, outcomes[k]!));
        });
      }
    }
    this.pool.release(instance);
    this.schedule();
  }

  /** Take the state outputs into the sequence; answer only what the client asked for. */
  private keepState(seq: Seq, p: Pending, res: InferResponse | StatusError): InferResponse | StatusError {
    if (res instanceof StatusError || !this.spec.states.length) return res;
    const stateNames = new Set(this.spec.states.map((s) => s.outputName));
    const asked = new Set(p.request.outputs.map((o) => o.name));
    for (const t of res.outputs) {
      // A copy: the response's bytes may view a buffer the backend reuses.
      if (stateNames.has(t.name)) seq.data.state.set(t.name, { ...t, data: Uint8Array.from(t.data) });
    }
    res.outputs = res.outputs.filter((t) => !stateNames.has(t.name) || asked.has(t.name));
    return res;
  }

  private settle(seq: Seq, p: Pending, outcome: InferResponse | StatusError): void {
    seq.data.running = false;
    if (seq.ended && seq.data.queue.length === 0) this.slots.release(seq);
    this.core.settle(p.request.arrivalNs!, outcome, p.resolve, p.reject);
  }

  /** max_sequence_idle_microseconds: release sequences with no request for that long. */
  private armIdleTimer(): void {
    let at = this.slots.nextIdleAt(this.spec.maxIdleNs);
    if (at === undefined || this.core.stopping) return;
    // A due sequence still running is looked at again a little later, not in a tight loop.
    const now = this.core.clock.nowNs();
    const floor = now + IDLE_RECHECK_NS;
    if (at < floor) at = floor;
    this.idleTimer.armBy(at, now);
  }

  private reapIdle(): void {
    const now = this.core.clock.nowNs();
    for (const s of this.slots.idle(now, this.spec.maxIdleNs, (x) => !x.data.running && x.data.queue.length === 0)) {
      log.info(`sequence ${s.id} of model '${this.modelName}' released after ${Number(this.spec.maxIdleNs / 1000n)} us idle`);
      this.slots.releaseIdle(s, now);
    }
    this.armIdleTimer();
    this.schedule();
  }
}
