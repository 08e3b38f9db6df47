// Shared pieces of the HTTP frontend: the Hono env type, reading request
// bodies straight from node:http, JSON bodies, and the one error reply.
import type { IncomingMessage } from 'node:http';
import type { Context } from 'hono';
import type { HttpBindings } from '@hono/node-server';
import { httpStatusOf, invalidArg, StatusError } from '../status.ts';
import { log } from '../trace.ts';
import { parseJson } from './infer-json.ts';
import { release, take } from '../receive-pool.ts';

/** Bindings are absent when the app is driven through `app.request()` in tests. */
export type HttpEnv = { Bindings: Partial<HttpBindings> };
export type Ctx = Context<HttpEnv>;

/** Triton's --http-max-input-size default. */
export const DEFAULT_MAX_INPUT_BYTES = 64 * 1024 * 1024;

/**
 * The whole request body as one Buffer. Under @hono/node-server it is read
 * from the node:http stream into a buffer sized by Content-Length (one copy
 * per chunk, no concat, no web-stream wrapper). The Buffer owns its
 * ArrayBuffer (never Node's shared pool), so tensors viewing it may be
 * transferred to a worker; all binary inputs of a request share it. A
 * large one comes from the receive pool: a caller that knows when nothing
 * reads it any more may give it back with receive-pool's release().
 */
export async function readBody(c: Ctx, maxBytes = DEFAULT_MAX_INPUT_BYTES): Promise<Buffer> {
  const incoming = c.env?.incoming;
  const declared = Number(c.req.header('content-length') ?? NaN);
  if (declared > maxBytes) throw tooLarge(declared, maxBytes);
  if (!incoming || incoming.readableDidRead || incoming.readableEnded) {
    const body = Buffer.from(await c.req.arrayBuffer());
    if (body.length > maxBytes) throw tooLarge(body.length, maxBytes);
    return body;
  }
  return readIncoming(incoming, Number.isSafeInteger(declared) ? declared : -1, maxBytes);
}

function tooLarge(n: number, max: number): StatusError {
  return invalidArg(`request body of ${n} bytes exceeds the HTTP input size limit of ${max} bytes`);
}

function readIncoming(incoming: IncomingMessage, declared: number, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    // From the receive pool: a large body is reused instead of allocated per request (see receive-pool.ts).
    let buf: Buffer | undefined = declared >= 0 ? take(declared) : undefined;
    const chunks: Buffer[] = [];
    let n = 0;
    const done = (err?: Error) => {
      incoming.off('data', onData);
      incoming.off('end', onEnd);
      incoming.off('error', onError);
      incoming.off('close', onClose);
      if (err) return reject(err);
      if (buf) return resolve(n === buf.length ? buf : buf.subarray(0, n));
      const all = Buffer.allocUnsafeSlow(n);
      let o = 0;
      for (const ch of chunks) o += ch.copy(all, o);
      resolve(all);
    };
    const onData = (chunk: Buffer) => {
      if (n + chunk.length > maxBytes) {
        incoming.pause();
        return done(tooLarge(n + chunk.length, maxBytes));
      }
      if (buf && n + chunk.length > buf.length) {
        chunks.push(Buffer.from(buf.subarray(0, n))); // more than declared: fall back to chunks
        release(buf);
        buf = undefined;
      }
      if (buf) chunk.copy(buf, n);
      else chunks.push(chunk);
      n += chunk.length;
    };
    const onEnd = () => done();
    const onError = (e: Error) => done(e);
    const onClose = () => {
      if (!incoming.readableEnded) done(new StatusError('CANCELLED', 'client closed the connection before sending the whole body'));
    };
    incoming.on('data', onData);
    incoming.on('end', onEnd);
    incoming.on('error', onError);
    incoming.on('close', onClose);
  });
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
  if (err instanceof StatusError) {
    if (httpStatusOf(err.code) >= 500) log.error(`HTTP ${c.req.method} ${c.req.path}: ${err.message}`, err.detail);
    return replyJson(c, { error: err.message }, httpStatusOf(err.code));
  }
  log.error(`HTTP ${c.req.method} ${c.req.path} failed`, err);
  return replyJson(c, { error: 'internal error' }, 500);
}

/** The optional version path segment: undefined when absent. */
export function versionParam(c: Ctx): string | undefined {
  const v = c.req.param('version');
  return v === undefined || v === '' ? undefined : v;
}
