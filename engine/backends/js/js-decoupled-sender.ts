// One decoupled JS request's responses. Two ways to answer, after Triton's
// backend API: `send(result)` during execute() (the request ends when
// execute resolves), or the request's response sender (`responseSender()`,
// Triton's response factory), which keeps the request open past execute()
// until the model sends with `final: true` (with a result or none), so the
// instance takes its next batch at once while this request still streams,
// as Triton's repeat backend releases its requests. Each send goes to the
// request's stream (onResponse) at once; without a stream (a call from
// another model) the last one is the answer. Main thread only.
import type { InferRequest, InferResponse } from '../../api/infer-request.ts';
import { internal, type StatusError } from '../../api/status.ts';

/** A model's answer for one request: its outputs, or its error. */
export type JsResult =
  | { outputs: Record<string, { datatype?: string; shape: number[]; data: ArrayBufferView }> }
  | { error: { code?: string; message: string } };

/** Triton's response factory for a JS model: the request stays open until a send with `final`. */
export interface JsResponseSender {
  /** Send `result` (null: none, only the final flag); `final` ends the request. Throws once it ended. */
  send(result: JsResult | null, opts?: { final?: boolean }): void;
}

type Outcome = InferResponse | StatusError;

export class DecoupledSender {
  /** The model took the response sender: the request outlives execute(). */
  private held = false;
  /** No send is accepted any more. */
  private closed = false;
  private last: Outcome | undefined;
  private resolveEnd: ((o: Outcome) => void) | undefined;
  /** The request's outcome once it ended (execute resolved, or the held sender's final send). */
  readonly ended: Promise<Outcome>;

  constructor(
    private readonly req: InferRequest,
    private readonly version: string,
    private readonly convert: (r: JsResult) => Outcome,
  ) {
    this.ended = new Promise((resolve) => (this.resolveEnd = resolve));
  }

  /** execute()'s own send: one response now. */
  send(result: JsResult): void {
    if (this.closed) throw new Error('response sender is closed: the request has ended');
    this.deliver(result);
  }

  /** The request's response sender (the same one each call). */
  responseSender(): JsResponseSender {
    if (this.closed) throw new Error('response sender is closed: the request has ended');
    this.held = true;
    return {
      send: (result, opts) => {
        if (this.closed) throw new Error('response sender is closed: the request has ended');
        if (result) this.deliver(result, opts?.final === true);
        if (opts?.final) this.finish();
      },
    };
  }

  /** execute() resolved: the request ends now unless the model holds its sender. Returns whether it is still open. */
  executeReturned(): boolean {
    if (!this.held && !this.closed) this.finish();
    return !this.closed;
  }

  /** End the request with `err` if it is still open (execute threw, the model unloads). */
  fail(err: StatusError): void {
    if (this.closed) return;
    this.closed = true;
    this.resolveEnd?.(err);
  }

  /** `final`: the response carries the final flag (a stream marks it triton_final_response). */
  private deliver(result: JsResult, final = false): void {
    const r = this.convert(result);
    if (final && !('code' in r)) r.final = true;
    if (this.req.onResponse) this.req.onResponse(r);
    else this.last = r;
  }

  private finish(): void {
    this.closed = true;
    const end: Outcome = this.req.onResponse
      ? { modelName: this.req.modelName, modelVersion: this.version, id: this.req.id, outputs: [], streamEnd: true }
      : (this.last ?? internal(`decoupled model '${this.req.modelName}' sent no response`));
    this.resolveEnd?.(end);
  }
}
