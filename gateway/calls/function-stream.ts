// One call of a streaming function (its target is decoupled: one request,
// any number of responses) over the engine's ModelStreamInfer, read one
// response at a time by the HTTP reply or an async job.
//
// Ownership: owns one gRPC stream. Back-pressure: at most
// STREAM_HIGH_WATER_BYTES (256 KiB) of responses wait here for their reader; past that
// the gRPC stream is paused (grpc-js stops reading, HTTP/2 flow control
// stops the engine's writes) and resumed once the reader has taken them
// below the low mark, so a slow reader costs a bounded amount of gateway
// memory whatever the model sends. cancel() (the client went away) cancels
// the gRPC call, which cancels the request in the engine down to the model.
import type { ClientDuplexStream } from '@grpc/grpc-js';
import type { ModelInferRequest, ModelStreamInferResponse } from '../../client/grpc-client.ts';
import { GrpcStatus, isGrpcStatus } from '../../client/grpc-client.ts';
import { gatewayError, GatewayError } from '../core/errors.ts';
import type { ResolvedFunction, TensorSpec } from './function-registry.ts';
import { collectOutputs, type InvokeDeps } from './invoke.ts';
import { replyJson } from './reply-rows.ts';
import { WakeQueue } from '../../common/wake-queue.ts';

/** Responses a slow reader may leave waiting in the gateway, per stream, before the engine stream is paused. */
export const STREAM_HIGH_WATER_BYTES = 256 * 1024;
const LOW_WATER_BYTES = STREAM_HIGH_WATER_BYTES / 4;

/** What every open stream holds now, and the most it ever held (the bench and tests read it). */
export const streamStats = { open: 0, bufferedBytes: 0, peakBufferedBytes: 0, paused: 0 };

/** One response as its reply shape (rows mapping applied), or the error that ended or interrupted the stream. */
export type StreamItem = { body: unknown; bytes: number } | { error: GatewayError };

const decoupledCache = new WeakMap<object, Map<string, { at: number; decoupled: Promise<boolean> }>>();
const DECOUPLED_TTL_MS = 10_000;

/** Whether the function's target answers with a stream (model_transaction_policy { decoupled: true }); cached 10 s. */
export function isStreamingFunction(deps: InvokeDeps, fn: ResolvedFunction): Promise<boolean> {
  const engine = deps.engine;
  if (!engine.modelConfig || !engine.streamInfer) return Promise.resolve(false);
  let cache = decoupledCache.get(engine);
  if (!cache) decoupledCache.set(engine, (cache = new Map()));
  const key = `${fn.model}\u0000${fn.version}`;
  const hit = cache.get(key);
  if (hit && Date.now() - hit.at < DECOUPLED_TTL_MS) return hit.decoupled;
  const decoupled = engine.modelConfig(fn.model, fn.version).then(
    (cfg) => !!(cfg.model_transaction_policy as { decoupled?: boolean } | undefined)?.decoupled,
    () => {
      cache!.delete(key);
      return false; // the unary path reports what is wrong with the target
    },
  );
  cache.set(key, { at: Date.now(), decoupled });
  return decoupled;
}

export class FunctionStream {
  private readonly items = new WakeQueue<StreamItem>();
  private buffered = 0;
  private paused = false;
  private readonly call: ClientDuplexStream<ModelInferRequest, ModelStreamInferResponse>;
  /** Responses delivered so far. */
  count = 0;

  constructor(
    private readonly deps: InvokeDeps,
    private readonly fn: ResolvedFunction,
    req: ModelInferRequest,
    private readonly specs: TensorSpec[],
    traceparent?: string,
  ) {
    const timeoutMs = fn.definition.limits.timeoutMs;
    this.call = deps.engine.streamInfer!(timeoutMs, traceparent);
    streamStats.open++;
    this.call.on('data', (m: ModelStreamInferResponse) => this.onResponse(m));
    this.call.on('error', (e) => void this.onError(e));
    this.call.on('end', () => this.finish());
    this.call.write(req, () => this.markSent());
    this.call.end(); // one request per stream: the engine ends the stream after its final response
  }

  private sentHooks: Array<() => void> | undefined = [];

  private markSent(): void {
    const hooks = this.sentHooks;
    this.sentHooks = undefined;
    for (const h of hooks ?? []) h();
  }

  /** Run `fn` once the request has left (serialized and written) or the stream ended: its input bytes may be reused then. */
  onSent(fn: () => void): void {
    if (this.sentHooks) this.sentHooks.push(fn);
    else fn();
  }

  private onResponse(m: ModelStreamInferResponse): void {
    if (this.items.ended) return;
    if (m.error_message)
      return this.push({ error: gatewayError('STREAM_RESPONSE_ERROR', { name: this.fn.name, reason: m.error_message }) });
    const res = m.infer_response;
    if (!res || (res.outputs ?? []).length === 0) return; // an empty final-flag response carries nothing
    const raw = res.raw_output_contents ?? [];
    const bytes = raw.reduce((n, b) => n + b.byteLength, 0) + 64;
    try {
      this.push({ body: replyJson(this.fn, collectOutputs(res, this.specs, new Map())), bytes });
    } catch (e) {
      this.push({ error: e instanceof GatewayError ? e : gatewayError('ENGINE_ERROR', { name: this.fn.name }, e) });
    }
  }

  private async onError(e: unknown): Promise<void> {
    if (this.items.ended) return;
    if (isGrpcStatus(e, GrpcStatus.CANCELLED) && this.cancelled) return this.finish();
    const { engine } = this.deps;
    const timeoutMs = this.fn.definition.limits.timeoutMs;
    const err = engine.translateStreamError
      ? await engine.translateStreamError(e, this.fn.name, timeoutMs, this.fn.model)
      : gatewayError('ENGINE_ERROR', { name: this.fn.name }, e);
    this.push({ error: err });
    this.finish();
  }

  private push(item: StreamItem): void {
    if (this.items.ended) return;
    this.items.push(item);
    const n = 'bytes' in item ? item.bytes : 256;
    this.buffered += n;
    streamStats.bufferedBytes += n;
    streamStats.peakBufferedBytes = Math.max(streamStats.peakBufferedBytes, streamStats.bufferedBytes);
    if ('body' in item) this.count++;
    if (!this.paused && this.buffered >= STREAM_HIGH_WATER_BYTES) {
      this.paused = true;
      streamStats.paused++;
      this.call.pause();
    }
  }

  private finish(): void {
    if (this.items.ended) return;
    streamStats.open--;
    this.markSent();
    this.items.end();
  }

  /** Resolves once a response is waiting or the stream has ended. */
  ready(): Promise<void> {
    return this.items.ready();
  }

  /** The response or error next() would give, without taking it. */
  peek(): StreamItem | undefined {
    return this.items.peek();
  }

  /** The next response or error; undefined once the stream has ended and everything was read. */
  async next(): Promise<StreamItem | undefined> {
    const item = await this.items.next();
    if (!item) return undefined;
    const n = 'bytes' in item ? item.bytes : 256;
    this.buffered -= n;
    streamStats.bufferedBytes -= n;
    if (this.paused && this.buffered <= LOW_WATER_BYTES) {
      this.paused = false;
      streamStats.paused--;
      this.call.resume();
    }
    return item;
  }

  private cancelled = false;

  /** The reader is gone: cancel the engine request and drop what waits. */
  cancel(): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.call.cancel();
    streamStats.bufferedBytes -= this.buffered;
    if (this.paused) streamStats.paused--;
    this.paused = false;
    this.buffered = 0;
    this.items.clear();
    this.finish();
  }
}

/** Every response of `stream` as one array; the first error, or passing maxBytes of JSON, fails the call (and cancels the rest). */
export async function collectStream(stream: FunctionStream, fn: ResolvedFunction): Promise<unknown[]> {
  const limit = fn.definition.limits.maxBodyBytes;
  const out: unknown[] = [];
  let size = 2;
  for (let it = await stream.next(); it; it = await stream.next()) {
    if ('error' in it) {
      stream.cancel();
      throw it.error;
    }
    size += JSON.stringify(it.body).length + 1;
    if (size > limit) {
      stream.cancel();
      throw gatewayError('STREAM_TOO_LARGE', { name: fn.name, limit });
    }
    out.push(it.body);
  }
  return out;
}
