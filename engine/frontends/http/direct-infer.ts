// POST /v2/models/{m}[/versions/{v}]/infer served straight from node:http,
// ahead of the Hono app.
//
// Why: on the tiny recommender (256 B binary input, wrk, 16 keep-alive
// connections) Hono and @hono/node-server's per-request work (web Request
// and Response objects, header conversion, router search, Context) was a
// visible share of the engine's 0.12 ms CPU per inference, for a route that
// needs none of it (measured there: main thread from ~0.08 to ~0.06 ms per
// inference, on a noisy shared 2-core host). The other endpoints are rare
// and stay on Hono.
//
// Which requests: only those that node-server would hand to Hono unchanged
// and Hono would route to the infer route: method POST, an origin-form target
// of plain URL characters without dot segments, and a Host node-server takes
// as is. Anything else (other routes and methods, absolute-form targets, dot
// segments node-server's URL parsing removes, hosts it re-parses or refuses,
// a stray '%') goes to `fallback`, the Hono app, which answers as it always
// did. Replies match the Hono route's: same statuses, headers and JSON errors.
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { tryDecodeURIComponent } from 'hono/utils/url';
import type { ServerApi } from '../../api/server-api.ts';
import { HEADER_LENGTH } from './binary-extension.ts';
import { errorReply } from './http-util.ts';
import { discardBody, readNodeBody } from './incoming-body.ts';
import { handleInfer, type InferReply } from './infer-handler.ts';
import { nodeRequestSignal } from './request-signal.ts';

// A path segment of the characters node-server's fast URL check accepts
// (its reValidRequestUrl), plus '%', minus '/', '?' and '#'.
const SEGMENT = '[!$%&-.0-;=@-\\[\\]_a-z~]+';
const INFER_TARGET = new RegExp(`^/v2/models/(${SEGMENT})(?:/versions/(${SEGMENT}))?/infer(?:\\?|$)`);
/** node-server's reValidHost: a Host it uses without parsing. */
const PLAIN_HOST = /^[a-z0-9._-]+(?::(?:[1-5]\d{3,4}|[6-9]\d{3}))?$/;
/** A '%' not starting an escape: Hono's getPath takes a slower, different decoding route then. */
const STRAY_PERCENT = /%(?![0-9A-Fa-f]{2})/;

/** The model and version when this request is the infer route's to serve directly (the checks above), else undefined. */
export interface InferTarget {
  model: string;
  version: string | undefined;
}

export function inferTarget(method: string | undefined, url: string | undefined, host: string | undefined): InferTarget | undefined {
  const m = method === 'POST' ? INFER_TARGET.exec(url ?? '') : null;
  if (!m || host === undefined || !PLAIN_HOST.test(host)) return undefined;
  const model = decodeSegment(m[1]!);
  const version = m[2] === undefined ? undefined : decodeSegment(m[2]);
  if (model === undefined || (version === undefined && m[2] !== undefined)) return undefined;
  return { model, version };
}

/** A request listener that serves the infer route itself and passes everything else to `fallback`. */
export function directInferListener(api: ServerApi, maxInputBytes: number, fallback: RequestListener): RequestListener {
  return (req, res) => {
    const t = inferTarget(req.method, req.url, req.headers.host);
    if (!t) return fallback(req, res);
    void serveInfer(api, req, res, t.model, t.version, maxInputBytes);
  };
}

/** The segment as Hono's param() decodes it; undefined for '.'/'..' (node-server resolves those first, %2e too). */
function decodeSegment(s: string): string | undefined {
  if (s.includes('%') && STRAY_PERCENT.test(s)) return undefined;
  const d = tryDecodeURIComponent(s);
  return d === '.' || d === '..' ? undefined : d;
}

async function serveInfer(
  api: ServerApi,
  req: IncomingMessage,
  res: ServerResponse,
  model: string,
  version: string | undefined,
  maxInputBytes: number,
): Promise<void> {
  const arrivalNs = process.hrtime.bigint();
  let reply: InferReply;
  try {
    const body = await readNodeBody(req, maxInputBytes);
    reply = await handleInfer(api, body, {
      model,
      version,
      headerLength: req.headers['inference-header-content-length'] as string | undefined,
      traceparent: req.headers.traceparent as string | undefined,
      signal: nodeRequestSignal(req, res),
      arrivalNs,
    });
  } catch (err) {
    const { status, text } = errorReply(err, `POST ${req.url}`);
    res.writeHead(status, errorHead(text));
    res.end(text);
    return discardBody(req);
  }
  res.writeHead(200, replyHead(reply));
  res.end(reply.body);
}

/** The reply's header fields, in writing order (both fronts write these). */
export function replyHead(reply: InferReply): Record<string, string | number> {
  return reply.headerLength === undefined
    ? { 'Content-Type': 'application/json', 'Content-Length': reply.body.length }
    : { 'Content-Type': 'application/octet-stream', [HEADER_LENGTH]: reply.headerLength, 'Content-Length': reply.body.length };
}

/** An error reply's header fields. */
export function errorHead(text: string): Record<string, string | number> {
  return { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) };
}
