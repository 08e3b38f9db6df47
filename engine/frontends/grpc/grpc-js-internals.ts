// Every reach into @grpc/grpc-js's internals, in one file, behind one shape
// check. grpc-js has no public hook for three things the engine needs:
//
// 1. HTTP/2 frame size and windows (net/h2/http2-settings.ts): grpc-js
//    passes only maxConcurrentStreams to http2.createServer. We give each
//    http2 server it created the larger settings (Node's public
//    updateSettings, for the sessions it accepts from then on) and widen each
//    new session's connection window.
// 2. The direct ModelInfer path (grpc-direct-infer.ts): we take grpc-js's one
//    'stream' listener off each of its http2 servers and put a router in
//    front; streams the router does not take go to grpc-js untouched.
// 3. The receive-pool decoder: grpc-js assembles each received message with
//    Buffer.concat of its DATA chunks (a fresh ArrayBuffer per message). Its
//    StreamDecoder.write is replaced by protocol/grpc-framing.ts's reader,
//    which copies a large message straight into a receive-pool buffer (see
//    receive-pool.ts for why; docs/protocol-internals.md for what it saves).
//
// What of grpc-js this relies on (the version is pinned in package.json):
// Server#http2Servers, a Map keyed by the node:http2 servers it bound;
// Server#onStreamOpened(stream), its idle-connection accounting, called for
// each stream we serve ourselves; exactly one 'stream' listener on each http2
// server; build/src/stream-decoder.js's StreamDecoder with prototype.write
// and a maxReadMessageLength field. shapeProblem() checks all of it once,
// after the last bindAsync. If anything differs, none of the three is
// applied and one log line says why: every call is then served by grpc-js
// with Node's HTTP/2 defaults, slower but the same on the wire.
import { createRequire } from 'node:module';
import type { Http2Server, IncomingHttpHeaders, ServerHttp2Session, ServerHttp2Stream } from 'node:http2';
import path from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import { MessageReader, READ_TOO_LARGE } from '../../../protocol/grpc-framing.ts';
import { GrpcText } from '../../../protocol/grpc-status.ts';
import { CONNECTION_WINDOW, MAX_FRAME_SIZE, STREAM_WINDOW } from '../../../net/h2/http2-settings.ts';
import { POOLED_MIN_BYTES, take } from './receive-pool.ts';
import { log } from '../../../common/logger.ts';

type StreamListener = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number) => void;

interface ServerInternals {
  http2Servers?: unknown;
  onStreamOpened?: unknown;
}

interface StreamDecoderClass {
  prototype: { write?: unknown };
  new (maxReadMessageLength: number): { maxReadMessageLength?: unknown };
}

/** Streams served beside grpc-js: `accepts` picks them by their headers, `serve` answers one. */
export interface StreamRoute {
  accepts(headers: IncomingHttpHeaders): boolean;
  serve(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void;
}

export interface GrpcJsReaches {
  /** 1: larger HTTP/2 frames and windows. */
  widenHttp2: boolean;
  /** 2: streams to serve beside grpc-js (none: grpc-js serves every stream). */
  route?: StreamRoute;
  /** 3: large received messages into receive-pool buffers (process-wide: grpc-js's decoder class is shared). */
  pooledDecoder: boolean;
}

const requireHere = createRequire(import.meta.url);

function streamDecoderClass(): StreamDecoderClass | undefined {
  const main = requireHere.resolve('@grpc/grpc-js');
  return (requireHere(path.join(path.dirname(main), 'stream-decoder.js')) as { StreamDecoder?: StreamDecoderClass }).StreamDecoder;
}

/** What about `server` (bound) or grpc-js's decoder is not the shape this file mirrors; undefined when all is. */
export function shapeProblem(server: grpc.Server): string | undefined {
  const s = server as unknown as ServerInternals;
  if (!(s.http2Servers instanceof Map) || s.http2Servers.size === 0) return 'Server#http2Servers is not a Map of its bound http2 servers';
  if (typeof s.onStreamOpened !== 'function') return 'Server#onStreamOpened is not a method';
  for (const h2 of s.http2Servers.keys()) {
    const h = h2 as Partial<Http2Server>;
    if (typeof h?.listeners !== 'function' || typeof h.updateSettings !== 'function')
      return 'an http2Servers key is not a node:http2 server';
    if (h.listeners('stream').length !== 1) return 'an http2 server does not have exactly one stream listener';
  }
  let D: StreamDecoderClass | undefined;
  try {
    D = streamDecoderClass();
  } catch (err) {
    return `build/src/stream-decoder.js not found (${(err as Error).message})`;
  }
  if (typeof D !== 'function' || typeof D.prototype.write !== 'function') return 'StreamDecoder has no write method';
  if (new D(7).maxReadMessageLength !== 7) return 'StreamDecoder does not keep maxReadMessageLength';
  return undefined;
}

/**
 * Apply the reaches asked for to `server`, after its last bindAsync. False,
 * with one log line, when grpc-js is not the shape they were written for
 * (then none is applied).
 */
export function reachIntoGrpcJs(server: grpc.Server, reaches: GrpcJsReaches): boolean {
  const problem = shapeProblem(server);
  if (problem) {
    log.info(`grpc-js is not the shape this engine mirrors (${problem}): every call is served by grpc-js with Node's HTTP/2 defaults`);
    return false;
  }
  const s = server as unknown as { http2Servers: Map<Http2Server, unknown>; onStreamOpened(stream: ServerHttp2Stream): void };
  for (const h2 of s.http2Servers.keys()) {
    if (reaches.widenHttp2) widen(h2);
    if (reaches.route) routeStreams(h2, reaches.route, (stream) => s.onStreamOpened(stream));
  }
  if (reaches.pooledDecoder) installPooledDecoder(streamDecoderClass()!);
  return true;
}

function widen(h2: Http2Server): void {
  h2.updateSettings({ maxFrameSize: MAX_FRAME_SIZE, initialWindowSize: STREAM_WINDOW });
  h2.on('session', (session: ServerHttp2Session) => {
    // The session's SETTINGS exchange is under way; setLocalWindowSize sends
    // the WINDOW_UPDATE as soon as the session can write.
    try {
      session.setLocalWindowSize(CONNECTION_WINDOW);
    } catch {
      // a session already closing: nothing to widen
    }
  });
}

function routeStreams(h2: Http2Server, route: StreamRoute, opened: (stream: ServerHttp2Stream) => void): void {
  const grpcJs = h2.listeners('stream')[0] as StreamListener;
  h2.removeListener('stream', grpcJs);
  h2.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number) => {
    if (!route.accepts(headers)) return grpcJs.call(h2, stream, headers, flags);
    opened(stream);
    route.serve(stream, headers);
  });
}

/** Small messages as grpc-js allocates them; large ones from the receive pool. */
const allocReceived = (bytes: number): Buffer => (bytes < POOLED_MIN_BYTES ? Buffer.allocUnsafe(bytes) : take(bytes));

/** The reader behind one grpc-js StreamDecoder: every message of a stream, none used in place. */
class DecoderReader extends MessageReader {
  out: Buffer[] = [];

  protected onMessage(message: Buffer): boolean {
    this.out.push(message);
    return true;
  }
}

const READER = Symbol('receive-pool reader');
type PatchedDecoder = { maxReadMessageLength: number; [READER]?: DecoderReader };

/**
 * grpc-js's StreamDecoder.write: the framed messages (prefix included) that
 * `data` completes, or a throw with grpc-js's text for one over the limit.
 * Buffers from the pool are given back only by the ModelInfer handler
 * (grpc-server.ts); any other message's buffer is garbage collected.
 */
function write(this: PatchedDecoder, data: Buffer): Buffer[] {
  const reader = (this[READER] ??= new DecoderReader(this.maxReadMessageLength, allocReceived, false));
  const out: Buffer[] = [];
  reader.out = out;
  if (reader.write(data) === READ_TOO_LARGE) throw new Error(GrpcText.receivedTooLarge(reader.oversize, this.maxReadMessageLength));
  return out;
}

function installPooledDecoder(D: StreamDecoderClass): void {
  D.prototype.write = write;
}
