// The open requests of one python instance, answered through their response
// senders. As in Triton, the instance is free for the next batch once
// execute() returns; each request stays open here until the model sends its
// final flag (from any of its threads or tasks), its stub dies, or the
// instance closes. A decoupled request streams every response; a plain
// (non-decoupled) one is answered by its first response, as Triton's
// frontends take only that one (python_be.cc lets a plain model send one
// response, or return it from execute). A client's cancellation (the
// request's signal) is passed to the stub as a `cancel` frame, so the model's
// request.is_cancelled() turns true. Main thread only.
import type { InferRequest, InferResponse } from '../../api/infer-request.ts';
import { cancelled, type StatusError } from '../../api/status.ts';

/** What one request of a batch comes to: its response, or its error. */
type Outcome = InferResponse | StatusError;

const FINAL = 1;

/** One batch whose streams are open. */
interface Streams {
  requests: InferRequest[];
  /** Decoupled: every response streams; plain: the first response is the request's answer. */
  decoupled: boolean;
  finals: boolean[];
  /** Decoupled: the last response of a request that has no onResponse (a BLS or unary caller); plain: the first response. */
  last: Array<Outcome | undefined>;
  /** Why a request's stream was cut short (its outcome then). */
  failed: Array<StatusError | undefined>;
  /** Removes the cancel listeners. */
  unlisten: Array<() => void>;
  resolve(outcomes: Outcome[]): void;
}

export class DecoupledStreams {
  private readonly open = new Map<number, Streams>();

  constructor(
    /** Send the stub a cancel frame for request `index` of batch `seq`. */
    private readonly sendCancel: (seq: number, index: number) => void,
    /** The outcome of a decoupled request whose stream ended: its stream end, or its last response. */
    private readonly endOf: (req: InferRequest, last: Outcome | undefined) => Outcome,
    /** The outcome of a plain request that ended without a response (the stub never lets one). */
    private readonly noResponse: (req: InferRequest) => Outcome,
  ) {}

  /** Open the requests of batch `seq`; resolves with each request's final outcome once all ended. */
  add(seq: number, requests: InferRequest[], decoupled = true): Promise<Outcome[]> {
    return new Promise((resolve) => {
      const s: Streams = {
        requests,
        decoupled,
        finals: requests.map(() => false),
        last: requests.map(() => undefined),
        failed: requests.map(() => undefined),
        unlisten: [],
        resolve,
      };
      s.unlisten.push(watchCancel(requests, (index) => s.finals[index] || this.sendCancel(seq, index)));
      this.open.set(seq, s);
    });
  }

  /** Whether batch `seq` has streams open. */
  has(seq: number): boolean {
    return this.open.has(seq);
  }

  /** Request `index` of batch `seq` while its stream is open. */
  request(seq: number, index: number): InferRequest | undefined {
    const s = this.open.get(seq);
    return s && !s.finals[index] ? s.requests[index] : undefined;
  }

  /** A response (or only flags) for request `index` of batch `seq`; `out` undefined: none. */
  response(seq: number, index: number, flags: number, out: Outcome | undefined): void {
    const s = this.open.get(seq);
    const req = s?.requests[index];
    if (!s || !req || s.finals[index]) return;
    if (out && !s.decoupled) s.last[index] ??= out;
    else if (out) {
      if (flags & FINAL && !('code' in out)) out.final = true;
      if (req.onResponse) req.onResponse(out);
      else s.last[index] = out;
    }
    if (flags & FINAL) s.finals[index] = true;
    this.maybeEnd(seq, s);
  }

  /**
   * End every still-open request of batch `seq` with `err` (execute raised): its outcome is the
   * error, but for a plain request that already sent its response (Triton's frontends drop what follows it).
   */
  fail(seq: number, err: StatusError): void {
    const s = this.open.get(seq);
    if (!s) return;
    s.requests.forEach((_, i) => {
      if (s.finals[i]) return;
      s.finals[i] = true;
      if (s.decoupled || !s.last[i]) s.failed[i] = err;
    });
    this.maybeEnd(seq, s);
  }

  /** End every open stream of every batch with `err` (the stub died, the instance closed). */
  failAll(err: StatusError): void {
    for (const seq of [...this.open.keys()]) this.fail(seq, err);
  }

  /** Batches with open streams. */
  get size(): number {
    return this.open.size;
  }

  private maybeEnd(seq: number, s: Streams): void {
    if (!s.finals.every(Boolean)) return;
    this.open.delete(seq);
    for (const u of s.unlisten) u();
    // A stream its client cancelled ends CANCELLED (counted as a failure), whatever the model sent last.
    s.resolve(
      s.requests.map(
        (req, i) =>
          s.failed[i] ?? (req.signal?.aborted ? cancelled(`request for model '${req.modelName}' was cancelled`) : this.ended(s, req, i)),
      ),
    );
  }

  private ended(s: Streams, req: InferRequest, i: number): Outcome {
    if (s.decoupled) return this.endOf(req, s.last[i]);
    return s.last[i] ?? this.noResponse(req);
  }
}

/**
 * Call `cancel(index)` when request `index`'s client cancels it (its signal
 * aborts; at once if it already has). Returns the function that stops watching.
 */
export function watchCancel(requests: InferRequest[], cancel: (index: number) => void): () => void {
  const undo: Array<() => void> = [];
  requests.forEach((req, index) => {
    const signal = req.signal;
    if (!signal) return;
    const onAbort = () => cancel(index);
    if (signal.aborted) queueMicrotask(onAbort);
    else {
      signal.addEventListener('abort', onAbort, { once: true });
      undo.push(() => signal.removeEventListener('abort', onAbort));
    }
  });
  return () => {
    for (const u of undo) u();
  };
}
