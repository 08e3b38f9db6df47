// over 300 lines: exec, streamed responses, BLS, overruns and stub exits all settle the one table of running requests
// One python backend execution instance: a stub process (stub-process.ts)
// hosting the model's TritonPythonModel. Sends each batch as one `exec` frame
// and answers with the stub's responses; serves the stub's BLS calls through
// the engine; collects a decoupled model's streamed responses. A stub that
// dies fails only the requests it held and is started again (initialize
// included) on the next execute; one killed for passing its model's
// execution limit (execution-limit.ts) starts again at once. execute() never
// runs twice at once (the pool). The instance's state (STOPPED, STARTING,
// READY, CLOSED) is a Lifecycle (common/lifecycle.ts) private to it.
import type { BackendContext } from '../../api/backend.ts';
import type { ExecuteResult, ExecutionInstance } from '../../api/scheduler.ts';
import type { InferRequest } from '../../api/infer-request.ts';
import { serveBls } from './bls-bridge.ts';
import { serveModelControl } from './model-control-bridge.ts';
import type { RequestCancel } from '../../api/cancel-signal.ts';
import { StatusError, internal, toStatusError, unavailable } from '../../api/status.ts';
import { log, tracer } from '../../../common/logger.ts';
import { isDecoupled } from '../../api/decoupled.ts';
import { mergeAutoComplete } from './auto-complete.ts';
import { StubProcess, type StubExit } from './stub-process.ts';
import { Lifecycle } from '../../../common/lifecycle.ts';
import { INSTANCE_TRANSITIONS, type InstanceState } from './instance-state.ts';
import type { ResponseBody, StubFrame, StubFrameOf } from './stub-frames.ts';
import { InputArena, sweepShm } from './tensor-transfer.ts';
import { execFrame, frameOutcome, streamEnd, type Outcome } from './exec-frames.ts';
import { ReadinessProbe } from './readiness-probe.ts';
import { DecoupledStreams } from './decoupled-streams.ts';
import { requestBatchInputs, scatterRequestOutputs } from '../ragged-requests.ts';
import { overrunError, unloadedBeforeRun, unloadedWhileExecuting } from './execution-limit.ts';
import { overMemoryError, watchStubMemory } from './stub-memory-limit.ts';

const trace = tracer('python');
const FINAL = 1;

export interface PythonInstanceOptions {
  interpreter: string;
  modelFile: string;
  /** shm name prefix owned by this instance, e.g. /tpy.1234.7.add_sub */
  prefix: string;
  kind: string;
  deviceId: number;
  /** The model's execute_timeout_secs in ms: a longer execute gets its stub killed. */
  executeTimeoutMs?: number;
  /** The model's stub_memory_limit in bytes (stub-memory-limit.ts): a stub past it is killed. */
  memoryLimitBytes?: number;
  /** --backend-config=python,stub-timeout-seconds in ms: how long a new stub may take to come up (default 30 s). */
  stubTimeoutMs?: number;
  /** --backend-config=python,shm-default-byte-size: the input arena's size from the start (default 1 MiB). */
  arenaBytes?: number;
}

/** The batch whose execute() the stub is running. */
interface Running {
  seq: number;
  requests: InferRequest[];
  /** execute() returned (its responses went to the open requests), or why it failed. */
  resolve(outcome: StatusError | undefined): void;
}

export class PythonInstance implements ExecutionInstance {
  private stub: StubProcess | undefined;
  readonly #life: Lifecycle<InstanceState>;
  private starting: { resolve(): void; reject(e: StatusError): void } | undefined;
  private running: Running | undefined;
  private seq = 0;
  private blsSeq = 0;
  /** The cancellations of this stub's BLS calls in flight, by call id. */
  private readonly blsCalls = new Map<number, RequestCancel>();
  private readonly arena: InputArena;
  /** Whether the model defines is_ready() (the stub says so once initialize returned). */
  private hasIsReady = false;
  private readonly probe: ReadinessProbe;
  /** Why the engine is killing the stub: the error its running batch gets (else "the stub died"). */
  private killedFor: StatusError | undefined;
  /** The start in progress, shared by every caller. */
  private startingUp: Promise<void> | undefined;
  /** The requests still open (the instance is free while a model answers them through their response senders). */
  private readonly streams = new DecoupledStreams(
    (seq, index) => this.stub?.send({ t: 'cancel', seq, index }),
    (req, last) =>
      req.onResponse ? streamEnd(this.ctx, req) : (last ?? internal(`decoupled model '${this.ctx.modelName}' sent no response`)),
    () => internal(`python model '${this.ctx.modelName}' returned no response for a request`),
  );

  constructor(
    readonly name: string,
    private readonly ctx: BackendContext,
    private readonly opts: PythonInstanceOptions,
  ) {
    this.#life = new Lifecycle(INSTANCE_TRANSITIONS, 'STOPPED', `python instance ${name} of model '${ctx.modelName}'`);
    this.arena = new InputArena(`${opts.prefix}-in`, opts.arenaBytes);
    this.probe = new ReadinessProbe((rid) => this.stub?.send({ t: 'is_ready', rid }), `python model '${ctx.modelName}' ${name}`);
  }

  /** Where the instance is in its lifecycle. */
  get state(): InstanceState {
    return this.#life.state;
  }

  private get ready(): boolean {
    return this.#life.state === 'READY';
  }

  private get closed(): boolean {
    return this.#life.state === 'CLOSED';
  }

  /** Move to `to` unless closed: once CLOSED nothing moves (a start or exit still settling after close() is expected). */
  private moveTo(to: InstanceState): void {
    if (!this.closed) this.#life.to(to);
  }

  /** Read per use: auto_complete_config may set the policy after construction. */
  private get decoupled(): boolean {
    return isDecoupled(this.ctx.config);
  }

  /**
   * Spawn the stub and run initialize(args); rejects UNAVAILABLE with the
   * reason. With `autoComplete`, first runs the model's auto_complete_config
   * and merges its answer into the (shared) config.
   */
  async start(autoComplete = false): Promise<void> {
    if (this.closed) throw unloadedBeforeRun(this.ctx.modelName);
    this.#life.to('STARTING');
    const stub = new StubProcess(
      {
        interpreter: this.opts.interpreter,
        modelFile: this.opts.modelFile,
        prefix: this.opts.prefix,
        label: `'${this.ctx.modelName}' ${this.name}`,
      },
      (m) => this.stub === stub && this.onFrame(stub, m),
    );
    this.stub = stub;
    void stub.exited.then((how) => this.onExit(stub, how));
    try {
      await this.stubUp(stub);
      if (autoComplete) {
        const completed = new Promise<void>((resolve, reject) => (this.starting = { resolve, reject }));
        stub.send({ t: 'autocomplete', config: this.ctx.config, model_dir: this.ctx.modelDir });
        await completed;
      }
      const started = new Promise<void>((resolve, reject) => (this.starting = { resolve, reject }));
      stub.send({ t: 'init', args: this.initArgs() });
      await started;
      this.moveTo('READY');
      trace(`${this.name} of '${this.ctx.modelName}' started (pid ${stub.child.pid})`);
    } catch (err) {
      this.moveTo('STOPPED');
      stub.kill();
      await stub.exited;
      throw err;
    } finally {
      this.starting = undefined;
    }
  }

  /**
   * Wait for the stub's hello, at most stub-timeout-seconds (Triton's
   * pre-initialization wait and its words); initialize() itself is not bounded.
   */
  private async stubUp(stub: StubProcess): Promise<void> {
    const ms = this.opts.stubTimeoutMs ?? 30_000;
    let timer: NodeJS.Timeout | undefined;
    const up = new Promise<void>((resolve, reject) => (this.starting = { resolve, reject }));
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        log.error(
          `python stub of '${this.ctx.modelName}' ${this.name} (pid ${stub.child.pid}) did not come up within ${ms / 1000} s; killing it`,
        );
        reject(internal(`Timed out occurred while waiting for the stub process. Failed to initialize model instance ${this.name}`));
      }, ms);
    });
    try {
      await Promise.race([up, late]);
      this.arena.reserve();
    } finally {
      clearTimeout(timer);
    }
  }

  /** Triton's initialize(args) keys, all strings. */
  private initArgs(): Record<string, string> {
    return {
      model_config: JSON.stringify(this.ctx.config),
      model_instance_kind: this.opts.kind,
      model_instance_name: this.name,
      model_instance_device_id: String(this.opts.deviceId),
      model_repository: this.ctx.modelDir,
      model_version: String(this.ctx.version),
      model_name: this.ctx.modelName,
    };
  }

  /** Start the stub unless a start is under way (then wait for that one). */
  private restart(): Promise<void> {
    return (this.startingUp ??= this.start().then(
      () => {
        this.startingUp = undefined;
        log.info(`python stub of instance ${this.name} of '${this.ctx.modelName}' restarted`);
      },
      (err: unknown) => {
        this.startingUp = undefined;
        throw err;
      },
    ));
  }

  async execute(requests: InferRequest[]): Promise<ExecuteResult> {
    if (this.closed) throw unloadedBeforeRun(this.ctx.modelName);
    const t0 = process.hrtime.bigint();
    if (!this.stub?.alive || !this.ready) {
      try {
        await this.restart();
      } catch (err) {
        const e = toStatusError(err);
        return {
          responses: requests.map(() => e),
          timing: { computeInputNs: Number(process.hrtime.bigint() - t0), computeInferNs: 0, computeOutputNs: 0 },
        };
      }
    }
    const stub = this.stub!;
    // Each request also carries the batch's batch_input tensors (ragged-requests.ts).
    const extra = requestBatchInputs(this.ctx.config, requests);
    const wire = this.arena.encode(requests.map((r) => (extra.length ? [...r.inputs, ...extra] : r.inputs)));
    const seq = ++this.seq;
    const frame = execFrame(seq, this.ctx, requests, wire);
    const decoupled = this.decoupled;
    // Every request is open until answered: returned from execute, or sent through its response sender.
    const streams = this.streams.add(seq, requests, decoupled);
    const done = new Promise<StatusError | undefined>((resolve) => {
      this.running = { seq, requests, resolve };
    });
    const t1 = process.hrtime.bigint();
    stub.send(frame);
    const limit = this.opts.executeTimeoutMs;
    const watchdog = limit ? setTimeout(() => this.overrun(stub, seq, limit), limit) : undefined;
    const cap = this.opts.memoryLimitBytes;
    const memory =
      cap && stub.child.pid ? watchStubMemory(stub.child.pid, cap, (used) => this.overMemory(stub, seq, cap, used)) : undefined;
    let returned = await done;
    clearTimeout(watchdog);
    const over = memory?.stop(); // the batch returned, but its stub passed the limit meanwhile: fail it and restart the stub
    if (over !== undefined && !returned && this.stub === stub)
      returned = this.killStub(stub, overMemoryError(this.ctx.modelName, this.name, cap!, over));
    const t2 = process.hrtime.bigint();
    const timing = { computeInputNs: Number(t1 - t0), computeInferNs: Number(t2 - t1), computeOutputNs: 0 };
    if (returned) this.streams.fail(seq, returned);
    // Free for the next batch now, as in Triton, when requests are still open; the batch settles as they end.
    // A batch_output is scattered once every request is answered (ragged-requests.ts); a decoupled model's streams are not.
    const scatter = (outs: Outcome[]) => (decoupled ? outs : scatterRequestOutputs(this.ctx.config, requests, outs));
    if (this.streams.has(seq)) return { responses: [], timing, streams: streams.then(scatter) };
    return { responses: scatter(await streams), timing };
  }

  private onFrame(stub: StubProcess, m: StubFrame): void {
    switch (m.t) {
      case 'hello':
        this.starting?.resolve();
        return;
      case 'ready':
        this.hasIsReady = m.has_is_ready === true;
        this.starting?.resolve();
        return;
      case 'config':
        if (m.config) {
          const filled = mergeAutoComplete(this.ctx.config, m.config);
          if (filled.length) log.info(`python model '${this.ctx.modelName}': auto_complete_config filled ${filled.join(', ')}`);
        }
        this.starting?.resolve();
        return;
      case 'init_error': {
        const why =
          m.kind === 'numpy'
            ? `python interpreter '${this.opts.interpreter}' cannot import numpy (${m.message})`
            : `Failed to initialize python model '${this.ctx.modelName}' instance ${this.name}: ${m.message}`;
        this.starting?.reject(unavailable(why));
        return;
      }
      case 'exec_done':
        return this.onExecDone(m);
      case 'resp':
        return this.onStreamed(m);
      case 'bls':
        return this.onBls(stub, m);
      case 'bls_cancel':
        return this.blsCalls.get(m.bid)?.abort();
      case 'model_control':
        return serveModelControl(m, this.ctx, (f) => stub.send(f));
      case 'is_ready_reply':
        return this.probe.reply(m);
      case 'fini_done':
        return; // the exit follows
      default:
        log.warn(`python ${this.name}: unknown frame '${(m as { t: unknown }).t}' from stub`);
    }
  }

  private onExecDone(m: StubFrameOf<'exec_done'>): void {
    const r = this.running;
    if (!r || r.seq !== m.seq) return;
    this.running = undefined;
    if (m.error !== undefined) {
      const text = m.raw ? m.error : `Failed to process the request(s) for model instance '${this.name}', message: ${m.error}`;
      return r.resolve(new StatusError('INTERNAL', text));
    }
    // A plain model's returned responses end their requests; a null one is answered by its sender.
    const frames = m.responses ?? [];
    r.requests.forEach((req, i) => {
      const f = frames[i];
      if (f) this.streams.response(m.seq, i, FINAL, this.toOutcome(req, f));
    });
    r.resolve(undefined);
  }

  /** A response sent through a request's response sender (from any of the model's threads or tasks). */
  private onStreamed(m: StubFrameOf<'resp'>): void {
    if (!this.streams.has(m.seq)) return;
    const req = this.streams.request(m.seq, m.index);
    const out = m.has_response && req ? this.toOutcome(req, m) : undefined;
    this.streams.response(m.seq, m.index, m.flags, out);
  }

  private toOutcome(req: InferRequest, f: ResponseBody | undefined): Outcome {
    return frameOutcome(this.ctx, this.opts.prefix, req, f);
  }

  /** A BLS call from inside execute: run it on the engine and answer (the stub's reader thread waits). */
  private onBls(stub: StubProcess, m: StubFrameOf<'bls'>): void {
    serveBls(
      m,
      this.ctx,
      this.opts.prefix,
      () => `${this.opts.prefix}.b${++this.blsSeq}`,
      (body) => stub.send({ t: 'bls_reply', bid: m.bid, ...body }),
      this.blsCalls,
    );
  }

  /** The batch `seq`'s stub passed its memory limit while executing: kill it (onExit fails the batch and starts it again). */
  private overMemory(stub: StubProcess, seq: number, limit: number, used: number): void {
    if (this.stub !== stub || this.running?.seq !== seq || this.closed) return;
    this.killStub(stub, overMemoryError(this.ctx.modelName, this.name, limit, used));
  }

  /** Kill the stub for `why` (logged; the exit fails what it held with it and starts the stub again). */
  private killStub(stub: StubProcess, why: StatusError): StatusError {
    this.killedFor = why;
    log.error(why.message);
    stub.kill();
    return why;
  }

  /** The batch `seq` is still executing past the model's limit: kill the stub (onExit fails the batch and starts it again). */
  private overrun(stub: StubProcess, seq: number, ms: number): void {
    if (this.stub !== stub || this.running?.seq !== seq || this.closed) return;
    this.killStub(stub, overrunError(this.ctx.modelName, this.name, ms));
  }

  /** The stub is gone: fail what it held (start or batch), drop its shm objects. */
  private onExit(stub: StubProcess, exit: StubExit): void {
    if (this.stub !== stub) return;
    const how = exit.text;
    // A stub that dies while starting: start() moves to STOPPED when its wait rejects below.
    if (this.ready) this.moveTo('STOPPED');
    this.probe.abandon();
    sweepShm(this.opts.prefix);
    // The BLS calls it made have no one to answer: cancel them.
    for (const c of this.blsCalls.values()) c.abort();
    this.blsCalls.clear();
    const killedFor = this.killedFor;
    this.killedFor = undefined;
    if (this.starting) {
      this.starting.reject(
        unavailable(exit.kind === 'spawn-failed' ? how : `python stub for model '${this.ctx.modelName}' ${how} during initialize`),
      );
      return;
    }
    const r = this.running;
    this.running = undefined;
    const msg = `python stub of instance ${this.name} of model '${this.ctx.modelName}' ${how}`;
    const err = killedFor ?? internal(`${msg} while executing; the request failed (the stub restarts on the next request)`);
    r?.resolve(err);
    this.streams.failAll(err);
    if (this.closed) return;
    if (killedFor) {
      this.restart().catch((err: unknown) =>
        log.error(`python stub of instance ${this.name} of '${this.ctx.modelName}' did not start again: ${toStatusError(err).message}`),
      );
      return;
    }
    log.error(`${msg}; it restarts on its next request`);
  }

  /**
   * finalize(), then kill the process group and remove every shm object of
   * this instance. A stub still executing (the unload's exit timeout has
   * passed) is killed at once: its batch fails saying so.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.#life.to('CLOSED');
    const stub = this.stub;
    if (stub?.alive && (this.running || this.streams.size)) {
      this.killedFor = unloadedWhileExecuting(this.ctx.modelName, this.name);
      stub.kill();
    } else if (stub?.alive) {
      stub.send({ t: 'fini' });
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([stub.exited, new Promise((r) => (timer = setTimeout(r, 5000)))]);
      clearTimeout(timer);
    }
    stub?.kill();
    if (stub) await stub.exited;
    this.arena.close();
    sweepShm(this.opts.prefix);
  }

  /**
   * The model's is_ready() when it defines one; true otherwise, and while the
   * stub is down (it starts again on the next request, as after a crash).
   */
  isReady(): Promise<boolean> {
    if (this.closed || !this.hasIsReady || !this.stub?.alive || !this.ready) return Promise.resolve(!this.closed);
    return this.probe.check();
  }

  /** The stub's pid (tests). */
  get pid(): number | undefined {
    return this.stub?.alive ? this.stub.child.pid : undefined;
  }
}
