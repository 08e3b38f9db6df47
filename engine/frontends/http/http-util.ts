// Shared pieces of the HTTP frontend's Hono routes: the env type, request
// bodies (read from node:http by incoming-body.ts), JSON replies, and the
// one error reply (also written by the direct infer path).
import type { Context } from 'hono';
import type { HttpBindings } from '@hono/node-server';
import { httpStatusOf, invalidArg, StatusError } from '../../api/status.ts';
import { log } from '../../../common/logger.ts';
import { parseJson } from './infer-json.ts';
import { DEFAULT_MAX_INPUT_BYTES, readNodeBody, tooLarge } from './incoming-body.ts';

/** Bindings are absent when the app is driven through `app.request()` in tests. */
export type HttpEnv = { Bindings: Partial<HttpBindings> };
export type Ctx = Context<HttpEnv>;

/**
 * The whole request body as one Buffer. Under @hono/node-server it is read
 * from the node:http stream (readNodeBody); without Node bindings (tests'
 * app.request()) from the web Request.
 */
export async function readBody(c: Ctx, maxBytes = DEFAULT_MAX_INPUT_BYTES): Promise<Buffer> {
  const incoming = c.env?.incoming;
  if (!incoming || incoming.readableDidRead || incoming.readableEnded) {
    const declared = Number(c.req.header('content-length') ?? NaN);
    if (declared > maxBytes) throw tooLarge(declared, maxBytes);
    const body = Buffer.from(await c.req.arrayBuffer());
    if (body.length > maxBytes) throw tooLarge(body.length, maxBytes);
    return body;
  }
  return readNodeBody(incoming, maxBytes);
}

/** A JSON body; an empty body reads as `{}` (optional bodies in Triton's API). */
export async function readJsonBody(c: Ctx, what: string): Promise<Record<string, unknown>> {
  const body = await readBody(c);
  if (body.length === 0) return {};
  const doc = parseJson(body, what);
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw invalidArg(`the ${what} must be a JSON object`);
  return doc as Record<string, unknown>;
}

/** JSON reply from a precomputed string or a value. */
export function replyJson(c: Ctx, value: unknown, status = 200): Response {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return c.body(text, status as 200, { 'Content-Type': 'application/json' });
}

/** A reply with no body (health answers, register/unload acknowledgements). */
export function emptyReply(c: Ctx, status: number): Response {
  return c.body(null, status as 200, { 'Content-Length': '0' });
}

/** The one error exit: StatusError -> Triton's status + {"error": msg}; others -> generic 500, logged. */
export function replyError(c: Ctx, err: unknown): Response {
  const { status, text } = errorReply(err, `${c.req.method} ${c.req.path}`);
  return replyJson(c, text, status);
}

/** Status and JSON text of the error reply to `what` (method and path, for the log), for either transport. */
export function errorReply(err: unknown, what: string): { status: number; text: string } {
  if (err instanceof StatusError) {
    const status = httpStatusOf(err.code);
    if (status >= 500) log.error(`HTTP ${what}: ${err.message}`, err.detail);
    return { status, text: JSON.stringify({ error: err.message }) };
  }
  log.error(`HTTP ${what} failed`, err);
  return { status: 500, text: JSON.stringify({ error: 'internal error' }) };
}

/** The optional version path segment: undefined when absent. */
export function versionParam(c: Ctx): string | undefined {
  const v = c.req.param('version');
  return v === undefined || v === '' ? undefined : v;
}
