// POST /fn/<name> for a streaming function (its target is decoupled): the
// responses as server-sent events (Accept: text/event-stream), as NDJSON
// lines (Accept: application/x-ndjson), or collected into one JSON array
// bounded by the function's maxBodyBytes. A middleware ahead of invoke.ts:
// calls of other functions pass through untouched. Each response gets the
// function's output names and rows mapping, as a unary reply would. Like
// Triton's generate_stream, the status waits for the first response: a call
// failing before any response gets the usual catalog error reply; an error
// after that is an `error` event (an `{"error": ...}` line), and the stream
// goes on if the model does. SSE ends with an `end` event counting the
// responses. A client that goes away cancels the engine request.
import type { Context, MiddlewareHandler } from 'hono';
import type { GatewayEnv } from '../core/gateway-env.ts';
import { checkApiKey } from '../calls/api-key.ts';
import { gatewayError, type GatewayError } from '../core/errors.ts';
import type { ResolvedFunction } from '../calls/function-registry.ts';
import { collectStream, FunctionStream, isStreamingFunction, type StreamItem } from '../calls/function-stream.ts';
import { buildRequest, CallSlices, readInputs, callOutputs, type InvokeDeps } from '../calls/invoke.ts';
import { sseEvent } from '../../common/sse.ts';

type Mode = 'sse' | 'ndjson' | 'json';

/** The reply form a call's Accept header asks for. */
export function streamMode(accept: string | undefined): Mode {
  const a = (accept ?? '').toLowerCase();
  if (a.includes('text/event-stream')) return 'sse';
  if (a.includes('application/x-ndjson')) return 'ndjson';
  return 'json';
}

/** One stream item in the wire form of `mode` (sse or ndjson). */
export function encodeItem(mode: Mode, item: StreamItem): string {
  if ('error' in item) return mode === 'sse' ? sseEvent(item.error.toJSON(), 'error') : `${JSON.stringify(item.error.toJSON())}\n`;
  return mode === 'sse' ? sseEvent(item.body) : `${JSON.stringify(item.body)}\n`;
}

/** The names of the streaming functions among `functions` (for OpenAPI). */
export async function streamingFunctions(deps: InvokeDeps, functions: ResolvedFunction[]): Promise<Set<string>> {
  const flags = await Promise.all(functions.map((fn) => isStreamingFunction(deps, fn)));
  return new Set(functions.filter((_, i) => flags[i]).map((fn) => fn.name));
}

/** Middleware: answer calls of streaming functions, pass the rest on. */
export function streamCalls(deps: InvokeDeps): MiddlewareHandler<GatewayEnv> {
  return async (c, next) => {
    const fn = await deps.registry.resolve(c.req.param('name')!);
    if (!(await isStreamingFunction(deps, fn))) return next();
    c.set('fn', fn.name);
    return streamInvoke(c, deps, fn);
  };
}

async function streamInvoke(c: Context<GatewayEnv>, deps: InvokeDeps, fn: ResolvedFunction): Promise<Response> {
  checkApiKey(fn.definition, (h) => c.req.header(h));
  const id = c.req.header('x-request-id') ?? crypto.randomUUID();
  c.header('X-Request-Id', id);
  const mode = streamMode(c.req.header('accept'));
  const slices = new CallSlices(deps.arena);
  let stream: FunctionStream;
  try {
    // A large raw body may land in a staging slice; it goes to the engine inline (the stream sends bytes).
    const { inputs, outputs: wanted } = await readInputs(c, fn, deps, slices);
    const { specs } = callOutputs(fn, wanted, c);
    const req = buildRequest(
      fn,
      id,
      inputs,
      specs.map((s) => ({ name: s.tensor })),
      false,
    );
    stream = new FunctionStream(deps, fn, req, specs, c.req.header('traceparent'));
  } catch (e) {
    slices.releaseAll();
    throw e;
  }
  stream.onSent(() => slices.releaseAll());
  const signal = c.req.raw.signal;
  const onGone = () => stream.cancel();
  signal.addEventListener('abort', onGone, { once: true });
  if (mode === 'json') {
    try {
      return c.json(await collectStream(stream, fn));
    } finally {
      signal.removeEventListener('abort', onGone);
    }
  }
  await stream.ready();
  const first = stream.peek();
  if (first && 'error' in first) {
    stream.cancel();
    throw (first as { error: GatewayError }).error; // nothing sent yet: the one error exit
  }
  const enc = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const item = await stream.next();
      if (item) return controller.enqueue(enc.encode(encodeItem(mode, item)));
      if (mode === 'sse') controller.enqueue(enc.encode(sseEvent({ responses: stream.count }, 'end')));
      signal.removeEventListener('abort', onGone);
      controller.close();
    },
    cancel: onGone,
  });
  const type = mode === 'sse' ? 'text/event-stream; charset=utf-8' : 'application/x-ndjson';
  return new Response(body, { status: 200, headers: { 'Content-Type': type, 'Cache-Control': 'no-cache', 'X-Request-Id': id } });
}
