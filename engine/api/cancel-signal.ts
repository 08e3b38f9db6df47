// The cancellation signal of a request: what the schedulers use of an
// AbortSignal (aborted, an 'abort' listener), and a cheap implementation of it
// for the frontends.
//
// The hook for a frontend whose client goes away (a closed gRPC stream, an
// HTTP client gone, a generate_stream reader that disconnects): give the
// request `signal = new RequestCancel()` before api.infer and call abort()
// on close. What it reaches: a queued request leaves its queue (CANCELLED);
// a python model's request.is_cancelled() and response_sender.is_cancelled()
// turn true (a `cancel` frame to its stub); a running request then ends
// CANCELLED, counted as a failed request in the statistics, and nothing more
// of it is written to the client.
//
// Why not AbortController there: a gRPC ModelInfer built one per request, and
// Node creates an AbortSignal (an EventTarget, with its internal symbols and
// listener maps) for each, plus an EventTarget listener per queued request: a
// visible share of the main thread in the profile (docs/benchmarks.md,
// "Request-path CPU per inference") for a signal that almost never fires. The
// HTTP frontend uses one too (http/request-signal.ts); a real AbortSignal fits
// the same interface.

/** The part of AbortSignal the engine uses; an AbortSignal is one. */
export interface CancelSignal {
  readonly aborted: boolean;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/** A one-shot cancellation: abort() runs each listener once, in order added. */
export class RequestCancel implements CancelSignal {
  aborted = false;
  private listeners: Array<() => void> | undefined;

  addEventListener(_type: 'abort', listener: () => void, _options?: { once?: boolean }): void {
    // As with AbortSignal, a listener added after abort() never runs; each runs
    // at most once, so `once` needs no handling.
    if (!this.aborted) (this.listeners ??= []).push(listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    const l = this.listeners;
    const i = l ? l.indexOf(listener) : -1;
    if (i >= 0) l!.splice(i, 1);
  }

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    const l = this.listeners;
    this.listeners = undefined;
    for (const f of l ?? []) {
      try {
        f();
      } catch (err) {
        // Like an EventTarget listener's error: reported, not thrown into abort()'s caller.
        queueMicrotask(() => {
          throw err;
        });
      }
    }
  }
}
