// Streams the engine's own HTTP/2 front (grpc-h2-front.ts) does not answer
// itself, relayed to grpc-js on its private loopback listener: every RPC but
// the plain unary ModelInfer (metadata, repository, shm, settings, health,
// ModelStreamInfer, compressed calls) keeps grpc-js's handling, status
// texts, deadlines and restrictions exactly, at the price of a second HTTP/2
// hop inside the process's own loopback.
//
// One relay per client connection, one HTTP/2 session to grpc-js per relay:
// when the client's connection goes, so does the session, and grpc-js sees
// its calls cancelled as it would have. Backpressure both ways: request bytes
// are credited back to the client only once grpc-js's stream took them, and
// grpc-js's answer is paused while the client's window holds it up.
import http2, { type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http2';
import { H2Error, type HeaderList } from './h2-frames.ts';
import type { H2Stream } from './h2-stream.ts';
import { CONNECTION_WINDOW, MAX_FRAME_SIZE, STREAM_WINDOW } from './http2-settings.ts';

/** Connection-specific headers HTTP/2 forbids (RFC 9113 §8.2.2): never relayed. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'http2-settings', 'host']);
const ignore = () => undefined;

/** Owns one HTTP/2 session to grpc-js, opened at the first relayed stream. */
export class GrpcJsRelay {
  private session: ClientHttp2Session | undefined;

  /** `target`: grpc-js's private listener, `http://127.0.0.1:<port>`. */
  constructor(private readonly target: string) {}

  private connect(): ClientHttp2Session {
    if (this.session && !this.session.closed && !this.session.destroyed) return this.session;
    const s = http2.connect(this.target, { settings: { initialWindowSize: STREAM_WINDOW, maxFrameSize: MAX_FRAME_SIZE } });
    s.on('error', ignore); // each stream's 'close' reports what happened to it
    s.once('connect', () => s.setLocalWindowSize(CONNECTION_WINDOW));
    return (this.session = s);
  }

  /** Relay `stream` to grpc-js and its answer back. */
  serve(stream: H2Stream): void {
    let req: ClientHttp2Stream;
    try {
      req = this.connect().request(requestHeaders(stream.headers));
    } catch {
      // headers node:http2 refuses to send (malformed in a way our reader let through): the stream fails alone
      return stream.reset(H2Error.PROTOCOL_ERROR);
    }
    let finished = false;
    stream.manualCredit = true;
    stream.onData = (chunk) => void req.write(chunk, () => stream.consumed(chunk.length));
    stream.onEnd = () => req.end();
    stream.onClose = (aborted) => {
      if (aborted && !finished && !req.closed) req.close(http2.constants.NGHTTP2_CANCEL);
    };
    req.on('error', ignore);
    req.on('response', (headers, flags) => {
      const endStream = (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) !== 0;
      if (endStream) finished = true;
      stream.respond(headerList(headers), endStream);
    });
    req.on('data', (chunk: Buffer) => {
      if (stream.write(chunk)) return;
      req.pause();
      stream.onDrain = () => req.resume();
    });
    let trailers: HeaderList | undefined;
    req.on('trailers', (t) => (trailers = headerList(t)));
    req.on('end', () => {
      if (finished) return;
      finished = true;
      stream.end(trailers);
    });
    req.on('close', () => {
      if (finished || stream.closed) return;
      finished = true;
      // grpc-js reset the stream or the session died: the client sees the stream reset
      stream.reset(req.rstCode && req.rstCode !== http2.constants.NGHTTP2_NO_ERROR ? req.rstCode : H2Error.INTERNAL_ERROR);
    });
  }

  close(): void {
    this.session?.destroy();
    this.session = undefined;
  }
}

function requestHeaders(h: H2Stream['headers']): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(h)) {
    if (HOP_BY_HOP.has(k) || (k === 'te' && v !== 'trailers')) continue;
    out[k] = v;
  }
  return out;
}

/** node:http2's header object as a list to send, pseudo-headers first. */
function headerList(h: IncomingHttpHeaders): HeaderList {
  const out: Array<[string, string]> = [];
  const status = h[':status'];
  if (status !== undefined) out.push([':status', String(status)]);
  for (const [k, v] of Object.entries(h)) {
    if (k.startsWith(':') || v === undefined) continue;
    if (Array.isArray(v)) for (const x of v) out.push([k, x]);
    else out.push([k, String(v)]);
  }
  return out;
}
