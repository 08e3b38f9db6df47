// Reading request bodies under a byte limit. On @hono/node-server the body is
// read from the Node IncomingMessage itself (c.env.incoming): Hono's web
// Request wrapper costs about twice as much for megabyte bodies (measured here),
// and reading the socket directly lets a staged body land straight in its
// shm slice with no intermediate buffer. Elsewhere (app.request() in tests)
// the web stream is used.
import type { Context } from 'hono';
import type { IncomingMessage } from 'node:http';
import { gatewayError } from '../core/errors.ts';

type Chunks = AsyncIterable<Uint8Array>;

function incomingOf(c: Context): IncomingMessage | undefined {
  const env = c.env as { incoming?: IncomingMessage } | undefined;
  return env?.incoming && typeof env.incoming.on === 'function' ? env.incoming : undefined;
}

async function* webChunks(c: Context): Chunks {
  const body = c.req.raw.body;
  if (!body) return;
  const reader = body.getReader();
  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) {
        finished = true;
        return;
      }
      yield value;
    }
  } finally {
    // A consumer that stops early (a limit) cancels the rest of the body.
    if (!finished) await reader.cancel().catch(() => undefined);
  }
}

function chunks(c: Context): Chunks {
  return incomingOf(c) ?? webChunks(c);
}

/** The declared Content-Length, or undefined (chunked / absent / malformed). */
export function contentLength(c: Context): number | undefined {
  const v = c.req.header('content-length');
  if (v === undefined || !/^\d+$/.test(v)) return undefined;
  return Number(v);
}

/**
 * Feed every chunk of a Node request to `onChunk` with plain listeners (the
 * small-call hot path: cheaper than an async iterator). Same outcome as
 * `for await`: `onChunk` throwing rejects (and destroys the request unless
 * `destroyOnThrow` is false: the caller then decides what happens to it); an error
 * or a close before the end rejects.
 */
function eachIncomingChunk(incoming: IncomingMessage, onChunk: (chunk: Buffer) => void, destroyOnThrow = true): Promise<void> {
  if (incoming.readableEnded) return Promise.resolve();
  if (incoming.destroyed) return Promise.reject(Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }));
  return new Promise((resolve, reject) => {
    const done = (err?: unknown) => {
      incoming.off('data', onData);
      incoming.off('end', onEnd);
      incoming.off('error', onError);
      incoming.off('close', onClose);
      if (err === undefined) resolve();
      else reject(err);
    };
    const onData = (chunk: Buffer) => {
      try {
        onChunk(chunk);
      } catch (e) {
        done(e);
        if (destroyOnThrow) incoming.destroy();
      }
    };
    const onEnd = () => done();
    const onError = (e: Error) => done(e);
    const onClose = () => done(Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }));
    incoming.on('data', onData);
    incoming.on('end', onEnd);
    incoming.on('error', onError);
    incoming.on('close', onClose);
  });
}

/**
 * A body over its limit: answer 413 at once and close the connection after
 * the reply. The rest of the body is read and dropped (never buffered), not
 * reset: a reset before the client reads the reply would lose the 413.
 */
export function tooLarge(c: Context, fn: string, limit: number): Error {
  c.header('Connection', 'close');
  const incoming = incomingOf(c);
  if (incoming && !incoming.destroyed) {
    incoming.on('error', () => undefined); // the 413 is already decided; a reset while draining changes nothing
    incoming.resume();
  }
  return gatewayError('BODY_TOO_LARGE', { name: fn, limit });
}

/** The whole body as one Buffer; 413 (BODY_TOO_LARGE) once it passes `limit`, whatever its framing (chunked too). */
export async function readBody(c: Context, limit: number, fn: string): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  let n = 0;
  let over = false;
  const take = (chunk: Uint8Array) => {
    n += chunk.byteLength;
    if (n > limit) {
      over = true;
      throw new Error('over the limit');
    }
    parts.push(chunk);
  };
  const incoming = incomingOf(c);
  try {
    if (incoming) await eachIncomingChunk(incoming, take, false);
    else for await (const chunk of webChunks(c)) take(chunk);
  } catch (e) {
    if (over) throw tooLarge(c, fn, limit);
    // The client went away mid-body (or its body timed out): not a gateway fault.
    const code = (e as NodeJS.ErrnoException)?.code;
    if (code === 'ECONNRESET' || code === 'ERR_STREAM_PREMATURE_CLOSE') {
      throw gatewayError('BODY_INVALID', { reason: 'the connection closed before the body ended' }, e);
    }
    throw e;
  }
  return parts.length === 1 ? Buffer.from(parts[0]!.buffer, parts[0]!.byteOffset, parts[0]!.byteLength) : Buffer.concat(parts, n);
}

/**
 * Stream exactly `length` body bytes into `dest` (a staging slice) with no
 * intermediate copy of the whole body; a body of any other length is BODY_INVALID.
 */
export async function readBodyInto(c: Context, dest: Uint8Array, length: number): Promise<void> {
  let pos = 0;
  for await (const chunk of chunks(c)) {
    if (pos + chunk.byteLength > length) {
      throw gatewayError('BODY_INVALID', { reason: `body is longer than its Content-Length of ${length} bytes` });
    }
    dest.set(chunk, pos);
    pos += chunk.byteLength;
  }
  if (pos !== length) throw gatewayError('BODY_INVALID', { reason: `body ended after ${pos} of ${length} bytes` });
}
