// A python model's own readiness check: Triton's python backend calls the
// model's optional `is_ready()` when a client asks whether the model is ready
// (GET /v2/models/<m>/ready, gRPC ModelReady). The stub answers on a thread
// of its own, so a check does not wait behind a running execute. Triton's
// rules: an answer later than 5 s counts as not ready; a check made while an
// earlier one is still unanswered waits on that same one instead of asking
// the model again; an exception or a non-bool answer counts as not ready.
import { log } from '../../../common/logger.ts';

export const READINESS_TIMEOUT_MS = 5000;

export interface ReadinessReply {
  rid: number;
  ready: boolean;
  /** Why the model is not ready when is_ready() raised or answered a non-bool. */
  error?: string;
}

export class ReadinessProbe {
  private rid = 0;
  private inflight: { rid: number; result: Promise<boolean>; settle(ready: boolean): void } | undefined;

  constructor(
    /** Sends {t: 'is_ready', rid} to the current stub. */
    private readonly ask: (rid: number) => void,
    /** For log lines: model and instance. */
    private readonly label: string,
    private readonly timeoutMs = READINESS_TIMEOUT_MS,
  ) {}

  /** The model's answer, or false after timeoutMs (the question stays open for the next check). */
  check(): Promise<boolean> {
    if (!this.inflight) {
      const rid = ++this.rid;
      let settle!: (ready: boolean) => void;
      const result = new Promise<boolean>((resolve) => (settle = resolve));
      this.inflight = { rid, result, settle };
      this.ask(rid);
    }
    const { result } = this.inflight;
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        log.warn(`${this.label}: is_ready() gave no answer within ${this.timeoutMs} ms; reported not ready`);
        resolve(false);
      }, this.timeoutMs);
      void result.then((ready) => {
        clearTimeout(timer);
        resolve(ready);
      });
    });
  }

  /** The stub's answer to question `rid`. */
  reply(m: ReadinessReply): void {
    if (!this.inflight || this.inflight.rid !== m.rid) return;
    if (m.error) log.warn(`${this.label}: is_ready() ${m.error}; reported not ready`);
    this.resolve(m.ready === true && !m.error);
  }

  /** The stub went away with a question open: that question's answer is "not ready". */
  abandon(): void {
    if (this.inflight) this.resolve(false);
  }

  private resolve(ready: boolean): void {
    const f = this.inflight!;
    this.inflight = undefined;
    f.settle(ready);
  }
}
