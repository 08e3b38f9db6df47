// Request bodies read straight from node:http, for the Hono routes
// (http-util.ts readBody) and the direct infer path (direct-infer.ts) alike.
import type { IncomingMessage } from 'node:http';
import { invalidArg, StatusError } from '../../api/status.ts';
import { release, take } from '../grpc/receive-pool.ts';

/** Triton's --http-max-input-size default. */
export const DEFAULT_MAX_INPUT_BYTES = 64 * 1024 * 1024;

/**
 * The body of a node:http request, read into a buffer sized by
 * Content-Length (one copy per chunk, no concat, no web-stream wrapper).
 * The Buffer owns its ArrayBuffer (never Node's shared pool), so tensors
 * viewing it may be transferred to a worker; all binary inputs of a request
 * share it. A large one comes from the receive pool: a caller that knows
 * when nothing reads it any more may give it back with receive-pool's
 * release(). Over `maxBytes` (declared or streamed) it rejects with
 * INVALID_ARG, Triton's answer, leaving the rest unread: see discardBody().
 */
export function readNodeBody(incoming: IncomingMessage, maxBytes = DEFAULT_MAX_INPUT_BYTES): Promise<Buffer> {
  const declared = Number(incoming.headers['content-length'] ?? NaN);
  if (declared > maxBytes) return Promise.reject(tooLarge(declared, maxBytes));
  return new Promise((resolve, reject) => {
    (incoming as Reading)[kRead] = {
      // From the receive pool: a large body is reused instead of allocated per request (see receive-pool.ts).
      buf: Number.isSafeInteger(declared) ? take(declared) : undefined,
      chunks: undefined,
      n: 0,
      maxBytes,
      resolve,
      reject,
    };
    incoming.on('data', onData);
    incoming.on('end', onEnd);
    incoming.on('error', onError);
    incoming.on('close', onClose);
  });
}

export function tooLarge(n: number, max: number): StatusError {
  return invalidArg(`request body of ${n} bytes exceeds the HTTP input size limit of ${max} bytes`);
}

// One read in progress, kept on the request itself so that its listeners are
// the module-level functions below rather than closures made per request:
// tsx (esbuild keepNames) wraps every named closure in an __name() call,
// which for five closures was ~3 µs of main thread per request (profiled on
// the tiny recommender under wrk).
const kRead = Symbol('readNodeBody');
interface Read {
  /** Sized by Content-Length; undefined without one, or once more arrived than declared. */
  buf: Buffer | undefined;
  /** The chunks when there is no `buf`. */
  chunks: Buffer[] | undefined;
  n: number;
  maxBytes: number;
  resolve(body: Buffer): void;
  reject(err: Error): void;
}
type Reading = IncomingMessage & { [kRead]?: Read };

function onData(this: Reading, chunk: Buffer): void {
  const r = this[kRead]!;
  const n = r.n + chunk.length;
  if (n > r.maxBytes) {
    this.pause();
    return settle(this, tooLarge(n, r.maxBytes));
  }
  if (r.buf && n > r.buf.length) {
    r.chunks = [Buffer.from(r.buf.subarray(0, r.n))]; // more than declared: fall back to chunks
    release(r.buf);
    r.buf = undefined;
  }
  if (r.buf) chunk.copy(r.buf, r.n);
  else (r.chunks ??= []).push(chunk);
  r.n = n;
}

function onEnd(this: Reading): void {
  settle(this);
}

function onError(this: Reading, err: Error): void {
  // node:http's 'aborted' (ECONNRESET): the client went away mid-body, a cancel and not a server error to log.
  if ((err as NodeJS.ErrnoException).code === 'ECONNRESET')
    return settle(this, new StatusError('CANCELLED', 'client closed the connection before sending the whole body'));
  settle(this, err);
}

function onClose(this: Reading): void {
  if (!this.readableEnded) settle(this, new StatusError('CANCELLED', 'client closed the connection before sending the whole body'));
}

function settle(incoming: Reading, err?: Error): void {
  const r = incoming[kRead]!;
  incoming[kRead] = undefined;
  incoming.off('data', onData);
  incoming.off('end', onEnd);
  incoming.off('error', onError);
  incoming.off('close', onClose);
  if (err) return r.reject(err);
  if (r.buf) return r.resolve(r.n === r.buf.length ? r.buf : r.buf.subarray(0, r.n));
  const all = Buffer.allocUnsafeSlow(r.n);
  let o = 0;
  for (const ch of r.chunks ?? []) o += ch.copy(all, o);
  r.resolve(all);
}

/**
 * After a reply sent before the body was read to its end (a body over the
 * limit): read and drop the rest so the connection can serve its next
 * request, but close it rather than take more than 64 MiB or 500 ms. What
 * @hono/node-server does for the routes it serves (its drainIncoming), so
 * both paths of the frontend treat such a client alike; Node alone would
 * either read without bound or leave a paused request stuck.
 */
export function discardBody(incoming: IncomingMessage): void {
  if (incoming.destroyed || incoming.readableEnded) return;
  let bytes = 0;
  const close = () => {
    stop();
    incoming.socket?.destroySoon();
  };
  const timer = setTimeout(close, DISCARD_MS).unref();
  const stop = () => {
    clearTimeout(timer);
    incoming.off('data', onDiscard);
    incoming.off('end', stop);
    incoming.off('error', stop);
  };
  const onDiscard = (chunk: Buffer) => {
    if ((bytes += chunk.length) > DISCARD_MAX_BYTES) close();
  };
  incoming.on('data', onDiscard);
  incoming.on('end', stop);
  incoming.on('error', stop);
  incoming.resume();
}

const DISCARD_MS = 500;
const DISCARD_MAX_BYTES = 64 * 1024 * 1024;
