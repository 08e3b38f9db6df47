// How a ModelStreamInfer stream hands its responses to HTTP/2, in order:
// - --grpc-max-response-pool-size (Triton's flag): at most this many
//   responses written and not yet taken by HTTP/2 at once; the others wait
//   here, in order, and go as earlier ones are taken. Triton bounds the
//   response objects a stream holds the same way. Unset: no bound.
// - TRITONSERVER_DELAY_GRPC_RESPONSE (Triton's test hook): a write waits
//   this many ms before it happens, so that several responses queue up
//   behind it (Triton's L0_decoupled test_one_to_multi_many: "there are
//   multiple responses available to be written"); when it happens, every
//   response queued by then goes, in order (the pool bound permitting), and
//   the next response waits again.
// What waits here still counts against --stream-max-queued-bytes
// (stream-queue-bound.ts): the caller adds it before pushing.

export interface StreamPacing {
  /** TRITONSERVER_DELAY_GRPC_RESPONSE: ms each response waits before it is written (0: none). */
  delayMs?: number;
  /** --grpc-max-response-pool-size: responses handed to HTTP/2 and not yet taken, at most (0 or unset: no bound). */
  maxResponsePoolSize?: number;
}

/** True when `p` changes anything (a stream without it writes straight through). */
export const pacingActive = (p: StreamPacing | undefined): p is StreamPacing =>
  !!p && ((p.delayMs ?? 0) > 0 || (p.maxResponsePoolSize ?? 0) > 0);

export class StreamResponsePacer<M> {
  private readonly queue: Array<{ m: M; taken: () => void }> = [];
  /** The delay before the queued responses was served: they go as the pool allows. */
  private delayServed = false;
  private inFlight = 0;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private idleWaiters: Array<() => void> = [];

  constructor(
    private readonly pacing: StreamPacing,
    /** Hand `m` to HTTP/2; call `taken` once it is taken. */
    private readonly writeNow: (m: M, taken: () => void) => void,
  ) {}

  /** Write `m` after those pushed before it; `taken` runs once HTTP/2 took it (never, if the stream closes first). */
  push(m: M, taken: () => void): void {
    if (this.closed) return;
    this.queue.push({ m, taken });
    this.pump();
  }

  /** Run `fn` once nothing waits here (at once when nothing does). */
  whenIdle(fn: () => void): void {
    if (this.idle) fn();
    else this.idleWaiters.push(fn);
  }

  /** The stream is gone: drop what waits, stop the timer. */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.queue.length = 0;
    this.idleWaiters = [];
  }

  private get idle(): boolean {
    return this.queue.length === 0 && this.timer === undefined;
  }

  private get full(): boolean {
    const max = this.pacing.maxResponsePoolSize ?? 0;
    return max > 0 && this.inFlight >= max;
  }

  private pump(): void {
    const delay = this.pacing.delayMs ?? 0;
    while (!this.closed && this.timer === undefined && this.queue.length > 0 && !this.full) {
      if (delay > 0 && !this.delayServed) {
        this.timer = setTimeout(() => {
          this.timer = undefined;
          this.delayServed = true;
          this.pump();
        }, delay);
        return;
      }
      this.sendHead();
    }
    // Everything that waited through the delay has gone: the next response waits again.
    if (this.queue.length === 0) this.delayServed = false;
    if (this.idle && this.idleWaiters.length) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const fn of waiters) fn();
    }
  }

  private sendHead(): void {
    const x = this.queue.shift()!;
    this.inFlight++;
    this.writeNow(x.m, () => {
      this.inFlight--;
      x.taken();
      this.pump();
    });
  }
}
