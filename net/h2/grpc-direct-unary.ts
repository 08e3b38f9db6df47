// Unary gRPC calls made straight on node:http2: one HTTP/2 session per
// target, one stream per call. Used by TritonGrpcClient for ModelInfer when
// asked to (the gateway does), beside its grpc-js channel for everything
// else.
//
// Why: a grpc-js client call costs ~0.3 ms of CPU on these machines (its
// channel, load-balancing and subchannel call layers, metadata and status
// objects), ~0.15 ms more than node:http2 making the same call (measured
// with test/bench/floor-gateway.ts). On the gateway's small /fn call that
// difference is a third of the gateway's whole CPU per call.
//
// Wire behaviour follows gRPC over HTTP/2: POST, application/grpc,
// grpc-timeout from the deadline, one length-prefixed message each way (the
// message sent behind its prefix without a copy), status from the trailers
// (or from a trailers-only answer); framing, timeout codec, status texts and
// windows are protocol/'s, shared with the engine's direct path. Failures are
// errors shaped like grpc-js's ServiceError (code, details, metadata), so
// callers handle both paths alike. Insecure (h2c) targets only: host:port
// or unix:/path.
//
// Ownership: one instance owns its session; close() ends it. A session that
// fails or is closed by the server is replaced on the next call. Calls beyond
// the server's SETTINGS_MAX_CONCURRENT_STREAMS wait for a free stream; one
// the server refuses unprocessed (REFUSED_STREAM) is sent again. Event loop
// only.
import http2 from 'node:http2';
import net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { endWithMessage, messagePrefix, READ_OK, UnaryMessageReader } from '../../protocol/grpc-framing.ts';
import { decodeGrpcMessage, GrpcStatus, grpcStatusName, GrpcText, type GrpcOutcome } from '../../protocol/grpc-status.ts';
import { formatGrpcTimeout } from '../../protocol/grpc-timeout.ts';
// The windows we advertise for answers (large outputs arrive without WINDOW_UPDATE stalls).
import { CONNECTION_WINDOW, STREAM_WINDOW } from './http2-settings.ts';

export interface DirectCallOptions {
  timeoutMs?: number;
  metadata?: Record<string, string>;
}

/** An error shaped like grpc-js's ServiceError. */
export function grpcError(code: number, details: string): grpc.ServiceError {
  const e = new Error(`${code} ${grpcStatusName(code)}: ${details}`) as grpc.ServiceError;
  e.code = code;
  e.details = details;
  e.metadata = new grpc.Metadata();
  return e;
}

/** Streams a session may open before the server's SETTINGS say otherwise (RFC 9113 recommends servers allow at least 100). */
const DEFAULT_STREAMS = 100;
/** Attempts of a call the server refused before processing it (REFUSED_STREAM: safe to send again). */
const MAX_ATTEMPTS = 5;

/** A session and the streams open on it. */
interface Conn {
  s: http2.ClientHttp2Session;
  active: number;
  /** The server's SETTINGS_MAX_CONCURRENT_STREAMS once known. */
  limit: number;
}

type Outcome = { ok: Buffer } | (GrpcOutcome & { refused?: boolean });

export class DirectUnaryChannel {
  private conn: Conn | undefined;
  private closed = false;
  /** Calls waiting for a stream slot, oldest first. */
  private readonly waiting: UnaryCall[] = [];

  constructor(private readonly target: string) {}

  /** Targets this channel can reach: host:port, [v6]:port, unix:/path (grpc-js's other schemes are not handled here). */
  static accepts(target: string): boolean {
    return /^unix:\//.test(target) || /^[\w.-]+:\d+$/.test(target) || /^\[[0-9a-fA-F:.]+\]:\d+$/.test(target);
  }

  /**
   * Send `message` (serialized, without the 5-byte prefix) to `path`;
   * resolve with the answer's message bytes. Calls beyond the server's
   * concurrent-stream limit wait for a slot (within their deadline).
   */
  call(path: string, message: Uint8Array, opts: DirectCallOptions = {}): Promise<Buffer> {
    if (this.closed) return Promise.reject(grpcError(GrpcStatus.CANCELLED, GrpcText.CHANNEL_SHUT_DOWN));
    const headers: http2.OutgoingHttpHeaders = { ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers' };
    if (opts.metadata) for (const k in opts.metadata) headers[k] = opts.metadata[k];
    return new Promise((resolve, reject) => {
      this.waiting.push(new UnaryCall(this, headers, message, opts.timeoutMs, resolve, reject));
      this.pump();
    });
  }

  close(): void {
    this.closed = true;
    for (const c of this.waiting.splice(0)) c.finish({ code: GrpcStatus.CANCELLED, details: GrpcText.CHANNEL_SHUT_DOWN });
    this.conn?.s.close();
    this.conn = undefined;
  }

  /** A call whose deadline passed while it waited for a slot leaves the queue. */
  forget(call: UnaryCall): void {
    const i = this.waiting.indexOf(call);
    if (i >= 0) this.waiting.splice(i, 1);
  }

  /** Start waiting calls while the session has free stream slots. */
  private pump(): void {
    while (this.waiting.length) {
      const conn = this.connNow();
      if (conn.active >= conn.limit) return;
      const call = this.waiting.shift()!;
      if (call.settled) continue;
      conn.active++;
      call.send(conn.s, (outcome) => {
        conn.active--;
        if ('refused' in outcome && outcome.refused && call.attempts < MAX_ATTEMPTS && !this.closed && !call.settled) {
          this.waiting.unshift(call); // never processed by the server: send it again
        } else call.finish(outcome);
        this.pump();
      });
    }
  }

  private connNow(): Conn {
    const live = this.conn;
    if (live && !live.s.closed && !live.s.destroyed) return live;
    const t = this.target;
    const opts: http2.ClientSessionOptions = { settings: { initialWindowSize: STREAM_WINDOW } };
    const s = t.startsWith('unix:')
      ? http2.connect('http://localhost', { ...opts, createConnection: () => net.connect(t.slice(5)) })
      : http2.connect(`http://${t}`, opts);
    const conn: Conn = { s, active: 0, limit: DEFAULT_STREAMS };
    s.once('connect', () => {
      try {
        s.setLocalWindowSize(CONNECTION_WINDOW);
      } catch {
        // a session closed meanwhile: its streams fail on their own
      }
    });
    s.on('remoteSettings', (settings) => {
      conn.limit = Math.max(1, settings.maxConcurrentStreams ?? DEFAULT_STREAMS);
      this.pump();
    });
    const drop = () => {
      if (this.conn === conn) this.conn = undefined;
    };
    s.on('error', drop); // each stream on it reports the failure itself
    s.on('goaway', drop);
    s.on('close', drop);
    s.unref(); // an idle session does not keep the process alive
    this.conn = conn;
    return conn;
  }
}

/**
 * One call: its deadline spans waiting for a slot and every attempt; it
 * settles once. The message is sent behind its prefix as it is (no copy).
 */
class UnaryCall {
  attempts = 0;
  settled = false;
  private readonly deadlineAt: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private attempt: Attempt | undefined;
  private readonly prefix: Buffer;

  constructor(
    private readonly channel: DirectUnaryChannel,
    private readonly headers: http2.OutgoingHttpHeaders,
    private readonly message: Uint8Array,
    timeoutMs: number | undefined,
    private readonly resolve: (b: Buffer) => void,
    private readonly reject: (e: grpc.ServiceError) => void,
  ) {
    this.prefix = messagePrefix(message.byteLength);
    if (timeoutMs) {
      this.deadlineAt = Date.now() + timeoutMs;
      this.timer = setTimeout(() => this.expire(), timeoutMs);
    }
  }

  send(session: http2.ClientHttp2Session, done: (o: Outcome) => void): void {
    this.attempts++;
    if (this.deadlineAt !== undefined) this.headers['grpc-timeout'] = formatGrpcTimeout(this.deadlineAt - Date.now());
    this.attempt = new Attempt(session, this.headers, this.prefix, this.message, (o) => {
      this.attempt = undefined;
      done(o);
    });
  }

  finish(o: Outcome): void {
    if (this.settled) return;
    this.settled = true;
    if (this.timer) clearTimeout(this.timer);
    if ('ok' in o) this.resolve(o.ok);
    else this.reject(grpcError(o.code, o.details));
  }

  private expire(): void {
    this.channel.forget(this);
    this.finish({ code: GrpcStatus.DEADLINE_EXCEEDED, details: GrpcText.DEADLINE_EXCEEDED });
    this.attempt?.cancel(); // after finish: its outcome only frees the stream slot
  }
}

/** One stream on the session: reads the one answer message and reports the outcome once. */
class Attempt {
  private readonly reader = new UnaryMessageReader(-1, Buffer.allocUnsafe);
  /** Something other than one whole message arrived. */
  private malformed = false;
  private status: string | undefined;
  private message: string | undefined;
  private responded = false;
  private ended = false;
  private readonly stream: http2.ClientHttp2Stream | undefined;

  constructor(
    session: http2.ClientHttp2Session,
    headers: http2.OutgoingHttpHeaders,
    prefix: Buffer,
    message: Uint8Array,
    private readonly done: (o: Outcome) => void,
  ) {
    let s: http2.ClientHttp2Stream;
    try {
      s = session.request(headers);
    } catch (e) {
      this.end({ code: GrpcStatus.UNAVAILABLE, details: `${GrpcText.NO_CONNECTION}: ${(e as Error).message}` });
      return;
    }
    this.stream = s;
    s.on('response', (h) => this.onHeaders(h, true));
    s.on('trailers', (h) => this.onHeaders(h, false));
    s.on('data', (d: Buffer) => this.onData(d));
    s.on('error', (e: Error) => this.end(this.broken(e.message)));
    s.on('close', () => this.onClose());
    endWithMessage(s, prefix, message);
  }

  /** The caller gave up (deadline): reset the stream and report it, which frees its slot. */
  cancel(): void {
    this.stream?.close(http2.constants.NGHTTP2_CANCEL);
    this.end({ code: GrpcStatus.CANCELLED, details: GrpcText.CANCELLED_ON_CLIENT });
  }

  private onData(d: Buffer): void {
    if (!this.malformed && this.reader.write(d) !== READ_OK) this.malformed = true;
  }

  private onHeaders(h: http2.IncomingHttpHeaders, response: boolean): void {
    if (response) this.responded = true;
    if (h['grpc-status'] !== undefined) this.status = String(h['grpc-status']);
    if (h['grpc-message'] !== undefined) this.message = String(h['grpc-message']);
    else if (h[':status'] !== undefined && Number(h[':status']) !== 200 && this.status === undefined) {
      this.message = GrpcText.httpStatus(String(h[':status']));
    }
  }

  private onClose(): void {
    if (this.ended) return;
    if (this.status === undefined) return this.end(this.broken(this.message ?? 'Connection dropped before the call ended'));
    const code = Number(this.status);
    if (code !== GrpcStatus.OK) return this.end({ code, details: this.message === undefined ? '' : decodeGrpcMessage(this.message) });
    const body = this.reader.message;
    if (this.malformed || !body || body[0] !== 0)
      return this.end({ code: GrpcStatus.INTERNAL, details: 'Expected one uncompressed response message' });
    this.end({ ok: body.subarray(5) });
  }

  /** A stream that ended without a status, classified as grpc-js does; a refusal before any answer may be sent again. */
  private broken(details: string): Outcome {
    const s = this.stream;
    if (s && !this.responded && s.rstCode === http2.constants.NGHTTP2_REFUSED_STREAM)
      return { code: GrpcStatus.UNAVAILABLE, details, refused: true };
    if (!s || s.session === undefined || s.session.destroyed || s.session.closed) return { code: GrpcStatus.UNAVAILABLE, details };
    if (s.rstCode === http2.constants.NGHTTP2_REFUSED_STREAM) return { code: GrpcStatus.UNAVAILABLE, details };
    if (s.rstCode === http2.constants.NGHTTP2_CANCEL) return { code: GrpcStatus.CANCELLED, details };
    if (s.rstCode === http2.constants.NGHTTP2_ENHANCE_YOUR_CALM) return { code: GrpcStatus.RESOURCE_EXHAUSTED, details };
    return { code: s.rstCode ? GrpcStatus.INTERNAL : GrpcStatus.UNAVAILABLE, details };
  }

  private end(o: Outcome): void {
    if (this.ended) return;
    this.ended = true;
    this.done(o);
  }
}
