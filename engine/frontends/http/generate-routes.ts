// POST /v2/models/{m}[/versions/{v}]/generate and /generate_stream (Triton's
// generate extension). Both take the flat JSON of generate-json.ts through
// ServerApi.infer with a response callback, so decoupled and ordinary models
// answer alike. /generate wants exactly one response; /generate_stream sends
// each as a server-sent event, an error as an `{"error": ...}` event, and
// ends after the final one. A failure before any response is the usual JSON
// error reply; the status line waits for the first response, so a stream
// whose first response is an error carries that error's status. The client
// closing the stream aborts the request's signal (queued: dropped; running:
// the model sees it). A client that stops reading holds at most
// --stream-max-queued-bytes of events here; past that its request is
// cancelled the same way and its stream ends with an error event
// (stream-queue-bound.ts).
import type { Hono } from 'hono';
import { RequestCancel } from '../../api/cancel-signal.ts';
import type { InferRequest, InferResponse } from '../../api/infer-request.ts';
import type { ServerApi } from '../../api/server-api.ts';
import { capMessage, httpStatusOf, invalidArg, StatusError, toStatusError, unavailable } from '../../api/status.ts';
import { StreamQueueBound } from '../stream-queue-bound.ts';
import { WakeQueue } from '../../../common/wake-queue.ts';
import { sseEvent } from '../../../common/sse.ts';
import { generateResponseJson, parseGenerateRequest } from './generate-json.ts';
import { readBody, replyJson, versionParam, type Ctx, type HttpEnv } from './http-util.ts';
import { requestSignal } from './request-signal.ts';
import { modelRoute } from './routes-models.ts';

const ONE_RESPONSE =
  'generate expects model to produce exactly 1 response, use generate stream for model that generates various number of responses';

export function registerGenerateRoutes(app: Hono<HttpEnv>, api: ServerApi, maxInputBytes: number, streamMaxQueuedBytes: number): void {
  modelRoute(app, 'post', '/generate', async (c) =>
    replyJson(c, generateResponseJson(await generate(api, await request(api, c, maxInputBytes)))),
  );
  modelRoute(app, 'post', '/generate_stream', async (c) => generateStream(api, await request(api, c, maxInputBytes), streamMaxQueuedBytes));
}

/** The engine request of a generate call, its signal aborted when the client goes away. */
async function request(api: ServerApi, c: Ctx, maxInputBytes: number): Promise<InferRequest & { signal: RequestCancel }> {
  const arrivalNs = process.hrtime.bigint();
  const model = c.req.param('model')!;
  const version = versionParam(c);
  const body = await readBody(c, maxInputBytes);
  const req = parseGenerateRequest(body, api.modelConfig(model, version), model, version);
  const cancel = new RequestCancel();
  const client = requestSignal(c);
  if (client.aborted) cancel.abort();
  else client.addEventListener('abort', () => cancel.abort(), { once: true });
  return { ...req, arrivalNs, signal: cancel, traceparent: c.req.header('traceparent') };
}

/** Run a request wanting exactly one response (a decoupled model may send it with the final flag apart). */
async function generate(api: ServerApi, req: InferRequest): Promise<InferResponse> {
  const got: Array<InferResponse | StatusError> = [];
  req.onResponse = (r) => got.push(r);
  const res = await api.infer(req);
  if (!res.streamEnd) return res;
  const err = got.find((r): r is StatusError => r instanceof Error);
  if (err) throw err;
  if (got.length !== 1) throw invalidArg(ONE_RESPONSE);
  return got[0] as InferResponse;
}

const errorEvent = (err: unknown) => sseEvent({ error: capMessage(toStatusError(err).message) });

/** Events of one stream as they come, read once by the response body; at most `bound` bytes of them wait. */
class EventQueue {
  private readonly q = new WakeQueue<string>();
  /** Set by generateStream: the bound on what waits for the reader. */
  bound: StreamQueueBound | undefined;
  /** The first response's error, when it was one (its status becomes the reply's). */
  firstError: StatusError | undefined;
  /** A failure before any event: the reply is the JSON error instead of a stream. */
  failed: unknown;
  count = 0;

  push(r: InferResponse | StatusError): void {
    if (this.q.ended) return;
    const ev = r instanceof Error ? errorEvent(r) : sseEvent(generateResponseJson(r));
    if (this.bound && !this.bound.add(ev.length)) return; // past the bound: the request is being cancelled
    if (this.count++ === 0 && r instanceof Error) this.firstError = toStatusError(r);
    this.q.push(ev);
  }

  end(err?: unknown): void {
    if (this.q.ended) return;
    if (err !== undefined) {
      if (this.count === 0) this.failed = err;
      else this.q.push(errorEvent(err));
    }
    this.q.end();
  }

  /** Resolves once something was queued or the stream ended. */
  ready(): Promise<void> {
    return this.q.ready();
  }

  /** The next event, or undefined at the end. */
  async next(): Promise<string | undefined> {
    const ev = await this.q.next();
    if (ev !== undefined) this.bound?.taken(ev.length);
    else this.bound?.close();
    return ev;
  }
}

async function generateStream(api: ServerApi, req: InferRequest & { signal: RequestCancel }, maxQueuedBytes: number): Promise<Response> {
  const q = new EventQueue();
  q.bound = new StreamQueueBound(maxQueuedBytes, `generate_stream for model '${req.modelName}'`, (reason) => {
    req.signal.abort();
    q.end(unavailable(reason));
  });
  req.onResponse = (r) => q.push(r);
  api.infer(req).then(
    (res) => {
      if (!res.streamEnd) q.push(res);
      q.end();
    },
    (err) => q.end(err),
  );
  await q.ready();
  if (q.failed !== undefined) throw q.failed; // nothing sent yet: the one JSON error exit
  const enc = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const ev = await q.next();
      if (ev === undefined) controller.close();
      else controller.enqueue(enc.encode(ev));
    },
    cancel() {
      req.signal.abort();
      q.bound?.close();
    },
  });
  const status = q.firstError ? httpStatusOf(q.firstError.code) : 200;
  return new Response(body, { status, headers: { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache' } });
}
