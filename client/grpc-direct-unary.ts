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
// grpc-timeout from the deadline, one length-prefixed message each way,
// status from the trailers (or from a trailers-only answer). Failures are
// errors shaped like grpc-js's ServiceError (code, details, metadata), so
// callers handle both paths alike. Insecure (h2c) targets only: host:port
// or unix:/path.
//
// Ownership: one instance owns its session; close() ends it. A session that
// fails or is closed by the server is replaced on the next call. Event loop
// only.
import http2 from 'node:http2';
import net from 'node:net';
import * as grpc from '@grpc/grpc-js';

/** The windows we advertise for answers (large outputs arrive without WINDOW_UPDATE stalls). */
const STREAM_WINDOW = 16 << 20;
const CONNECTION_WINDOW = 32 << 20;

export interface DirectCallOptions {
  timeoutMs?: number;
  metadata?: Record<string, string>;
}

/** An error shaped like grpc-js's ServiceError. */
export function grpcError(code: grpc.status, details: string): grpc.ServiceError {
  const e = new Error(`${code} ${grpc.status[code]}: ${details}`) as grpc.ServiceError;
  e.code = code;
  e.details = details;
  e.metadata = new grpc.Metadata();
  return e;
}

export class DirectUnaryChannel {
  private session: http2.ClientHttp2Session | undefined;
  private closed = false;

  constructor(private readonly target: string) {}

  /** Targets this channel can reach: host:port, [v6]:port, unix:/path (grpc-js's other schemes are not handled here). */
  static accepts(target: string): boolean {
    return /^unix:\//.test(target) || /^[\w.-]+:\d+$/.test(target) || /^\[[0-9a-fA-F:.]+\]:\d+$/.test(target);
  }

  /** Send `message` (serialized, without the 5-byte prefix) to `path`; resolve with the answer's message bytes. */
  call(path: string, message: Uint8Array, opts: DirectCallOptions = {}): Promise<Buffer> {
    if (this.closed) return Promise.reject(grpcError(grpc.status.CANCELLED, 'Channel has been shut down'));
    const headers: http2.OutgoingHttpHeaders = { ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers' };
    if (opts.timeoutMs) headers['grpc-timeout'] = `${Math.max(1, Math.ceil(opts.timeoutMs))}m`;
    if (opts.metadata) for (const k in opts.metadata) headers[k] = opts.metadata[k];
    const framed = Buffer.allocUnsafe(5 + message.byteLength);
    framed[0] = 0;
    framed.writeUInt32BE(message.byteLength, 1);
    framed.set(message, 5);
    return new Promise((resolve, reject) => new DirectCall(this.sessionNow(), headers, framed, opts.timeoutMs, resolve, reject));
  }

  close(): void {
    this.closed = true;
    this.session?.close();
    this.session = undefined;
  }

  private sessionNow(): http2.ClientHttp2Session {
    const live = this.session;
    if (live && !live.closed && !live.destroyed) return live;
    const t = this.target;
    const opts: http2.ClientSessionOptions = { settings: { initialWindowSize: STREAM_WINDOW } };
    const s = t.startsWith('unix:')
      ? http2.connect('http://localhost', { ...opts, createConnection: () => net.connect(t.slice(5)) })
      : http2.connect(`http://${t}`, opts);
    s.once('connect', () => {
      try {
        s.setLocalWindowSize(CONNECTION_WINDOW);
      } catch {
        // a session closed meanwhile: its streams fail on their own
      }
    });
    const drop = () => {
      if (this.session === s) this.session = undefined;
    };
    s.on('error', drop); // each stream on it reports the failure itself
    s.on('goaway', drop);
    s.on('close', drop);
    s.unref(); // an idle session does not keep the process alive
    this.session = s;
    return s;
  }
}

/** One call on the session: collects the answer and settles once. */
class DirectCall {
  private readonly parts: Buffer[] = [];
  private status: string | undefined;
  private message: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private settled = false;
  private readonly stream: http2.ClientHttp2Stream | undefined;

  constructor(
    session: http2.ClientHttp2Session,
    headers: http2.OutgoingHttpHeaders,
    framed: Buffer,
    timeoutMs: number | undefined,
    private readonly resolve: (b: Buffer) => void,
    private readonly reject: (e: grpc.ServiceError) => void,
  ) {
    let s: http2.ClientHttp2Stream;
    try {
      s = session.request(headers);
    } catch (e) {
      this.fail(grpc.status.UNAVAILABLE, `No connection established: ${(e as Error).message}`);
      return;
    }
    this.stream = s;
    if (timeoutMs) this.timer = setTimeout(() => this.onDeadline(), timeoutMs);
    s.on('response', (h) => this.onHeaders(h));
    s.on('trailers', (h) => this.onHeaders(h));
    s.on('data', (d: Buffer) => this.parts.push(d));
    s.on('error', (e: Error) => this.onError(e));
    s.on('close', () => this.onClose());
    s.end(framed);
  }

  private onHeaders(h: http2.IncomingHttpHeaders): void {
    if (h['grpc-status'] !== undefined) this.status = String(h['grpc-status']);
    if (h['grpc-message'] !== undefined) this.message = String(h['grpc-message']);
    else if (h[':status'] !== undefined && Number(h[':status']) !== 200 && this.status === undefined) {
      this.message = `Received HTTP status code ${h[':status']}`;
    }
  }

  private onDeadline(): void {
    this.stream?.close(http2.constants.NGHTTP2_CANCEL);
    this.fail(grpc.status.DEADLINE_EXCEEDED, 'Deadline exceeded');
  }

  private onError(e: Error): void {
    this.fail(this.brokenCode(), e.message);
  }

  private onClose(): void {
    if (this.settled) return;
    if (this.status === undefined) return this.fail(this.brokenCode(), this.message ?? 'Connection dropped before the call ended');
    const code = Number(this.status);
    if (code !== grpc.status.OK) return this.fail(code, this.message === undefined ? '' : decodeMessage(this.message));
    const body = this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts);
    if (body.length < 5 || body.readUInt32BE(1) !== body.length - 5 || body[0] !== 0) {
      return this.fail(grpc.status.INTERNAL, 'Expected one uncompressed response message');
    }
    this.settled = true;
    if (this.timer) clearTimeout(this.timer);
    this.resolve(body.subarray(5));
  }

  /** A call that ended without a status, classified as grpc-js does: the connection's loss is UNAVAILABLE. */
  private brokenCode(): grpc.status {
    const s = this.stream;
    if (!s || s.session === undefined || s.session.destroyed || s.session.closed) return grpc.status.UNAVAILABLE;
    if (s.rstCode === http2.constants.NGHTTP2_REFUSED_STREAM) return grpc.status.UNAVAILABLE;
    if (s.rstCode === http2.constants.NGHTTP2_CANCEL) return grpc.status.CANCELLED;
    if (s.rstCode === http2.constants.NGHTTP2_ENHANCE_YOUR_CALM) return grpc.status.RESOURCE_EXHAUSTED;
    return s.rstCode ? grpc.status.INTERNAL : grpc.status.UNAVAILABLE;
  }

  private fail(code: grpc.status, details: string): void {
    if (this.settled) return;
    this.settled = true;
    if (this.timer) clearTimeout(this.timer);
    this.reject(grpcError(code, details));
  }
}

/** grpc-message is percent-encoded; a malformed one is shown as sent. */
function decodeMessage(m: string): string {
  try {
    return decodeURI(m);
  } catch {
    return m;
  }
}
