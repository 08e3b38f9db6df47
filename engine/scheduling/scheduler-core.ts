// The bookkeeping every scheduler shares (Triton's src/scheduler.h contract
// behind the dynamic batcher, the sequence batcher and the ensemble
// scheduler): the in-flight count, stop-and-drain, the one-shot timer, and
// settle-and-answer (statistics, then the caller's promise, then one fewer in
// flight). Pure apart from the injected Clock; main thread only. Hot path:
// no closure or object made per request.
import type { InferResponse } from '../api/infer-request.ts';
import type { StatsSink } from '../api/scheduler.ts';
import { answerRequest } from '../api/scheduler.ts';
import { StatusError, unavailable } from '../api/status.ts';
import { systemClock, type Clock } from './scheduler-queue.ts';

export type { Clock } from './scheduler-queue.ts';

export interface SchedulerCoreOptions {
  /** The UNAVAILABLE message for a request after stop(), e.g. "model 'm' is not accepting requests". */
  refusal: string;
  stats: Pick<StatsSink, 'succeeded' | 'failed'>;
  clock?: Clock;
}

export class SchedulerCore {
  readonly clock: Clock;
  #inflight = 0;
  #stopping = false;
  #drained: Array<() => void> = [];
  readonly #refusal: string;
  readonly #stats: Pick<StatsSink, 'succeeded' | 'failed'>;

  constructor(opts: SchedulerCoreOptions) {
    this.clock = opts.clock ?? systemClock;
    this.#refusal = opts.refusal;
    this.#stats = opts.stats;
  }

  /** Requests accepted and not yet answered. */
  get inflight(): number {
    return this.#inflight;
  }

  /** Whether stop() was called. */
  get stopping(): boolean {
    return this.#stopping;
  }

  /** The UNAVAILABLE answer for a request that arrives after stop(), or undefined while accepting. */
  refused(): StatusError | undefined {
    return this.#stopping ? unavailable(this.#refusal) : undefined;
  }

  /** One more request in flight (it was accepted). */
  accept(): void {
    this.#inflight++;
  }

  /**
   * Answer an accepted request: record it in the statistics (`arrivalNs` to
   * now), resolve or reject its promise, and count it out of flight.
   */
  settle(
    arrivalNs: bigint,
    outcome: InferResponse | StatusError,
    resolve: (r: InferResponse) => void,
    reject: (e: StatusError) => void,
  ): void {
    answerRequest(this.#stats, Number(this.clock.nowNs() - arrivalNs), outcome, resolve, reject);
    this.done();
  }

  /** One fewer in flight; the last one out wakes stop(). */
  done(): void {
    this.#inflight--;
    if (this.#inflight === 0 && this.#drained.length > 0) {
      for (const d of this.#drained.splice(0)) d();
    }
  }

  /** Stop accepting; resolves once every accepted request has been answered. */
  stop(): Promise<void> {
    this.#stopping = true;
    if (this.#inflight === 0) return Promise.resolve();
    return new Promise((resolve) => this.#drained.push(resolve));
  }
}

/**
 * A one-shot timer on a Clock: at most one wake-up armed at a time, for an
 * absolute time in ns. The callback is fixed at construction (no closure per
 * arm).
 */
export class OneShotTimer {
  #armed: { at: bigint; handle: { cancel(): void } } | undefined;
  readonly #fire = (): void => {
    this.#armed = undefined;
    this.onFire();
  };

  constructor(
    private readonly clock: Clock,
    private readonly onFire: () => void,
  ) {}

  /** When the armed wake-up is due, or undefined when none is armed. */
  get at(): bigint | undefined {
    return this.#armed?.at;
  }

  /** Wake at `at` (undefined: not at all), replacing any other wake-up; keeps one already armed for that time. */
  armAt(at: bigint | undefined, now: bigint): void {
    if (this.#armed && this.#armed.at === at) return;
    this.cancel();
    if (at === undefined) return;
    this.#armed = { at, handle: this.clock.setTimer(this.#fire, at > now ? at - now : 0n) };
  }

  /** Wake at `at` unless a wake-up at or before it is armed already. */
  armBy(at: bigint, now: bigint): void {
    if (this.#armed && this.#armed.at <= at) return;
    this.armAt(at, now);
  }

  cancel(): void {
    this.#armed?.handle.cancel();
    this.#armed = undefined;
  }
}
