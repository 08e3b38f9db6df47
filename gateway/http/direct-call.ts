// POST /fn/<name> with a JSON body served straight from node:http, ahead of
// the Hono app (as the engine's HTTP frontend serves its infer route).
//
// Why: a small call spent most of the gateway's CPU outside the call itself:
// @hono/node-server's web Request/Response objects and header conversion,
// Hono's router and Context, a middleware chain (docs/gateway/performance.md
// has the profile). This listener reads the Node request, checks the key,
// decodes the inputs with a plan compiled once per function
// (json-inputs-fast.ts), calls the engine through the same runFunction and
// writes the reply once.
//
// Which requests: POST to /fn/<plain name> with no query, a Host that
// node-server takes as is, a JSON media type, no Prefer / X-Callback-Url
// (async), no binary Accept, a name that is not an inbound webhook, while the
// app is not draining, and a function that does not stream (a decoupled
// target goes to Hono's stream route). Everything else goes to `fallback` (the Hono app),
// which answers as it always did. Replies match the Hono route's: status,
// headers and body (test/integration/L0_gateway_direct.test.ts compares them).
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { checkApiKey } from '../calls/api-key.ts';
import { gatewayError, GatewayError } from '../core/errors.ts';
import type { ResolvedFunction } from '../calls/function-registry.ts';
import { runFunction, CallSlices, type InvokeDeps } from '../calls/invoke.ts';
import { parseScanned, type ScannedBody } from '../calls/json-body.ts';
import { fastJsonInputs } from '../calls/json-inputs-fast.ts';
import { isStreamingFunction } from '../calls/function-stream.ts';
import { isJsonType, jsonInputs, mediaType } from '../calls/payload-codec.ts';
import { selectOutputs } from '../calls/output-select.ts';
import { replyJsonText } from '../calls/reply-text.ts';
import { gatewayLog as log } from '../../common/logger.ts';

/** The app's in-flight accounting the direct route shares (app.ts). */
export interface CallGate {
  /** False while draining: the Hono route answers those (503). */
  open(): boolean;
  enter(): void;
  leave(): void;
}

export interface DirectCallDeps extends InvokeDeps {
  gate: CallGate;
  /** Async routes are mounted: names with inbound webhooks go to Hono. */
  jobs: boolean;
}

const DIRECT_TARGET = /^\/fn\/([A-Za-z0-9_-][A-Za-z0-9_.-]*)$/;
/** node-server's reValidHost: a Host it uses without parsing. */
const PLAIN_HOST = /^[a-z0-9._-]+(?::(?:[1-5]\d{3,4}|[6-9]\d{3}))?$/;

/** What a direct call reads of its request, whichever front (node:http or http1-front.ts) read it. */
export interface CallRequest {
  url: string;
  header(name: string): string | undefined;
  /** The whole body under `limit`, or a catalog error (BODY_TOO_LARGE sets `connection: close` on the reply). */
  body(reply: Reply, limit: number, fn: string): Promise<Buffer>;
}

/** The function name when this request is the direct route's to serve (the checks above), else undefined. */
export function directTarget(
  deps: DirectCallDeps,
  method: string | undefined,
  url: string | undefined,
  header: (name: string) => string | undefined,
): string | undefined {
  const m = method === 'POST' ? DIRECT_TARGET.exec(url ?? '') : null;
  if (!m || m[1] === '.' || m[1] === '..') return undefined;
  const host = header('host');
  const accept = header('accept');
  if (
    host === undefined ||
    !PLAIN_HOST.test(host) ||
    !isJsonType(mediaType(header('content-type'))) ||
    header('prefer') !== undefined ||
    header('x-callback-url') !== undefined ||
    (accept !== undefined && accept.includes('application/octet-stream')) ||
    !deps.gate.open() ||
    (deps.jobs && isWebhook(deps, m[1]!))
  )
    return undefined;
  return m[1]!;
}

const webhookNames = new WeakMap<DirectCallDeps, { version: string; names: Set<string> }>();
function isWebhook(deps: DirectCallDeps, name: string): boolean {
  const v = deps.registry.version;
  let hooks = webhookNames.get(deps);
  if (hooks?.version !== v) {
    hooks = {
      version: v,
      names: new Set(
        deps.registry
          .definitions()
          .filter((d) => d.webhook)
          .map((d) => d.name),
      ),
    };
    webhookNames.set(deps, hooks);
  }
  return hooks.names.has(name);
}

/** A request listener that serves plain JSON calls itself and passes everything else to `fallback`. */
export function directCallListener(deps: DirectCallDeps, fallback: RequestListener): RequestListener {
  return (req, res) => {
    const name = directTarget(deps, req.method, req.url, (k) => header(req, k));
    if (name === undefined) return fallback(req, res);
    routeCall(deps, req, res, name, fallback).catch((e: unknown) => {
      // Only a bug gets here (every call error is answered inside): log it, drop the connection.
      log.error(`POST ${req.url}: the direct route failed`, e);
      res.destroy();
    });
  };
}

let served = 0;
/** Calls this process served on the direct route, from either front (tests tell the routes apart by it). */
export function directCallsServed(): number {
  return served;
}

export interface Reply {
  status: number;
  headers: Record<string, string>;
  transfer: string;
}

/** The function resolved ahead of the call (or why it did not resolve: the call reports it in its place). */
export type Resolved = { fn: ResolvedFunction } | { err: unknown };

/** The call's function, or undefined for a streaming one (a decoupled target: Hono's stream route serves it). */
export async function resolveDirect(deps: DirectCallDeps, name: string): Promise<Resolved | undefined> {
  let pre: Resolved;
  try {
    pre = { fn: await deps.registry.resolve(name) };
  } catch (err) {
    pre = { err };
  }
  if ('fn' in pre && (await isStreamingFunction(deps, pre.fn))) return undefined;
  return pre;
}

async function routeCall(
  deps: DirectCallDeps,
  req: IncomingMessage,
  res: ServerResponse,
  name: string,
  fallback: RequestListener,
): Promise<void> {
  const pre = await resolveDirect(deps, name);
  if (!pre) return void fallback(req, res);
  const request: CallRequest = {
    url: req.url ?? '',
    header: (k) => header(req, k),
    body: (reply, limit, fn) => {
      const len = req.headers['content-length'];
      if (len !== undefined && /^\d+$/.test(len) && Number(len) > limit) throw tooLarge(req, reply, fn, limit);
      return readNodeBody(req, reply, limit, fn);
    },
  };
  const r = await serveCall(deps, request, pre);
  res.writeHead(r.status, r.headers);
  res.end(r.body);
}

/** The whole call: its reply's status, headers (in writing order) and body. Never rejects. */
export async function serveCall(
  deps: DirectCallDeps,
  req: CallRequest,
  pre: Resolved,
): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  const t0 = performance.now();
  served++;
  deps.gate.enter();
  const reply: Reply = { status: 500, headers: {}, transfer: 'inline' };
  let fnName = '(unknown)';
  try {
    let body: string;
    try {
      body = await call(deps, req, pre, reply, (n) => (fnName = n));
      reply.status = 200;
    } catch (e) {
      body = errorBody(e, req.url, reply);
    }
    const headers = {
      ...reply.headers,
      'content-type': 'application/json',
      'x-payload-transfer': reply.transfer,
      'content-length': String(Buffer.byteLength(body)),
    };
    return { status: reply.status, headers, body };
  } finally {
    deps.gate.leave();
    deps.metrics?.observe(fnName, reply.status, reply.transfer, (performance.now() - t0) / 1000);
  }
}

/** invoke.ts's steps for a JSON call, in its order; throws catalog errors. */
async function call(deps: DirectCallDeps, req: CallRequest, pre: Resolved, reply: Reply, named: (n: string) => void): Promise<string> {
  if ('err' in pre) throw pre.err;
  const fn = pre.fn;
  named(fn.name);
  checkApiKey(fn.definition, req.header);
  const given = req.header('x-request-id');
  const id = given ?? crypto.randomUUID();
  reply.headers['x-request-id'] = id;
  if (deps.plans) await deps.plans.admit(req.header, given);
  const slices = new CallSlices(deps.arena);
  const span = deps.tracing?.startCall(fn.name, id, req.header('traceparent'));
  let status = 500;
  try {
    const raw = await req.body(reply, fn.definition.limits.maxBodyBytes, fn.name);
    let parsed: ScannedBody;
    try {
      parsed = parseScanned(raw);
    } catch (e) {
      throw gatewayError('BODY_INVALID', { reason: `not valid JSON: ${(e as Error).message}` });
    }
    let fast = fastJsonInputs(fn, parsed.value, parsed.numbers);
    if (!fast && parsed.numbers) {
      // Declined: the plain fast path and the general one read JSON.parse's own value (no markers).
      parsed = { value: JSON.parse(raw.toString('utf8')), numbers: undefined };
      fast = fastJsonInputs(fn, parsed.value);
    }
    const { inputs, outputs: wanted } = fast ?? jsonInputs(fn, parsed.value);
    const specs = selectOutputs(fn, undefined, wanted); // no query on this route (declined above)
    const meta = { pin: req.header('x-deploy-side'), clientId: given !== undefined };
    const { outputs, transfer, side } = await runFunction(deps, fn, inputs, specs, id, slices, span?.traceparent, meta);
    status = 200;
    reply.transfer = transfer;
    if (side) reply.headers['x-deploy-side'] = side;
    return replyJsonText(fn, outputs);
  } catch (e) {
    status = e instanceof GatewayError ? e.status : 500;
    reply.transfer = slices.transfer;
    throw e;
  } finally {
    span?.end(status);
    slices.releaseAll();
  }
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
}

/** As body-reader.ts's tooLarge: 413 now, the connection closed after the reply, the rest of the body read and dropped. */
export function tooLarge(req: IncomingMessage | undefined, reply: Reply, fn: string, limit: number): GatewayError {
  reply.headers.connection = 'close';
  if (req && !req.destroyed) {
    req.on('error', () => undefined); // the 413 is already decided; a reset while draining changes nothing
    req.resume();
  }
  return gatewayError('BODY_TOO_LARGE', { name: fn, limit });
}

/** The whole body under `limit` (any framing), as body-reader.ts's readBody. */
function readNodeBody(req: IncomingMessage, reply: Reply, limit: number, fn: string): Promise<Buffer> {
  if (req.readableEnded) return Promise.resolve(Buffer.alloc(0));
  // Closed before anyone read it (while the function was resolved): its 'close' has been and will not come again.
  if (req.destroyed) return Promise.reject(gatewayError('BODY_INVALID', { reason: 'the connection closed before the body ended' }));
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let n = 0;
    const done = (err?: unknown) => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onClosed);
      req.off('close', onClosed);
      if (err) reject(err);
      else resolve(parts.length === 1 ? parts[0]! : Buffer.concat(parts, n));
    };
    const onData = (chunk: Buffer) => {
      n += chunk.byteLength;
      if (n > limit) done(tooLarge(req, reply, fn, limit));
      else parts.push(chunk);
    };
    const onEnd = () => done();
    const onClosed = (e?: Error) => done(gatewayError('BODY_INVALID', { reason: 'the connection closed before the body ended' }, e));
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onClosed);
    req.on('close', onClosed);
  });
}

/** app.ts's onError for the direct route: the catalog reply, INTERNAL for anything else. */
function errorBody(e: unknown, url: string, reply: Reply): string {
  if (e instanceof GatewayError) {
    if (e.headers) Object.assign(reply.headers, e.headers);
    if (e.status >= 500) log.warn(`POST ${url}: ${e.code}: ${e.message}${e.cause ? ` (${(e.cause as Error).message})` : ''}`);
    reply.status = e.status;
    return JSON.stringify(e.toJSON());
  }
  log.error(`POST ${url} failed`, e);
  reply.status = 500;
  return JSON.stringify(gatewayError('INTERNAL').toJSON());
}
