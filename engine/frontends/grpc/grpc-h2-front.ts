// The gRPC port on the engine's own HTTP/2 server (net/h2/h2-connection.ts)
// instead of node:http2 (docs/engine/h2-front.md for why and the figures).
// Plain unary ModelInfer, the call that carries the load, is answered here
// by the same DirectInferCall as on node:http2, with grpc-js's wire shapes;
// every other stream is relayed to grpc-js on a private loopback listener
// (grpc-js-relay.ts), so grpc-js stays the source of truth for every RPC's
// semantics. Which listeners it serves: `grpcFront` in ../transport-options.ts.
import net from 'node:net';
import type { ServerApi } from '../../api/server-api.ts';
import { H2ServerConnection } from '../../../net/h2/h2-connection.ts';
import { encodeHeaderBlock } from '../../../net/h2/h2-frames.ts';
import type { H2Stream } from '../../../net/h2/h2-stream.ts';
import { DEFAULT_H2_LIMITS, type H2Limits } from '../../../net/h2/h2-limits.ts';
import { FloodPenalty } from '../../../net/h2/h2-flood-penalty.ts';
import { messagePrefix } from '../../../protocol/grpc-framing.ts';
import { encodeGrpcMessage } from '../../../protocol/grpc-status.ts';
import { CONNECTION_WINDOW, MAX_FRAME_SIZE, STREAM_WINDOW } from '../../../net/h2/http2-settings.ts';
import {
  DirectInferCall,
  isDirectInfer,
  OK_TRAILERS,
  RESPONSE_HEADERS,
  TRAILERS_ONLY_HEADERS,
  type DirectInferOptions,
  type UnaryAnswer,
} from './grpc-direct-infer.ts';
import { GrpcJsRelay } from '../../../net/h2/grpc-js-relay.ts';

const SETTINGS = { maxFrameSize: MAX_FRAME_SIZE, streamWindow: STREAM_WINDOW, connectionWindow: CONNECTION_WINDOW };
const block = (h: Record<string, string | number>) => encodeHeaderBlock(Object.entries(h).map(([k, v]) => [k, String(v)] as const));
const OK_HEADERS_BLOCK = block(RESPONSE_HEADERS);
const OK_TRAILERS_BLOCK = block(OK_TRAILERS);
/** A message this small is sent behind its prefix in one DATA frame (copied); a larger one as two pieces, uncopied. */
const COALESCE_BYTES = 16 << 10;

export interface H2FrontOptions {
  /** The TCP listener; undefined: the Unix socket only. */
  tcp?: { host: string; port: number };
  /** Also listen on this Unix socket path (the colocated gateway's). */
  unixSocket?: string;
  /** grpc-js's private listener, `http://127.0.0.1:<port>`. */
  grpcJs: string;
  /** Bounds on what one client may make a connection spend (--grpc-h2-limit); defaults where not given. */
  limits?: Partial<H2Limits>;
  /** The direct ModelInfer path; undefined: every stream goes to grpc-js (with `inference` restricted). */
  direct?: { api: ServerApi; opts: DirectInferOptions };
}

/** Answers on one of our streams, with the same headers and trailers as on node:http2. */
class H2Answer implements UnaryAnswer {
  constructor(private readonly stream: H2Stream) {}

  gone(): boolean {
    return this.stream.closed;
  }

  fail(code: number, details: string): void {
    this.stream.respond(block({ ...TRAILERS_ONLY_HEADERS, 'grpc-status': code, 'grpc-message': encodeGrpcMessage(details) }), true);
  }

  ok(message: Buffer): void {
    const s = this.stream;
    s.respond(OK_HEADERS_BLOCK);
    const prefix = messagePrefix(message.length);
    if (message.length <= COALESCE_BYTES) s.write(Buffer.concat([prefix, message]));
    else {
      s.write(prefix);
      s.write(message);
    }
    s.end(OK_TRAILERS_BLOCK);
  }
}

function serveDirect(stream: H2Stream, direct: NonNullable<H2FrontOptions['direct']>): void {
  const call = new DirectInferCall(stream.headers, direct.api, direct.opts, new H2Answer(stream));
  stream.onClose = () => call.onClose();
  if (call.done) return;
  stream.onData = (chunk) => call.onData(chunk);
  stream.onEnd = () => call.onEnd();
}

/** Listen on `tcp` (port 0: a free one) and the Unix socket, those given; resolves with the TCP port (0: none). */
export async function startH2Front(o: H2FrontOptions): Promise<{ port: number; close(): Promise<void> }> {
  const conns = new Set<H2ServerConnection>();
  const limits = { ...DEFAULT_H2_LIMITS, ...o.limits };
  const penalty = new FloodPenalty(limits.floodPenaltyMs, limits.floodPenaltyMaxMs);
  /** Connections from a struck address, not read until their wait ends (h2-flood-penalty.ts). */
  const waiting = new Map<net.Socket, NodeJS.Timeout>();
  const serve = (socket: net.Socket, addr: string | undefined) => {
    let relay: GrpcJsRelay | undefined;
    const conn = new H2ServerConnection(socket, { ...SETTINGS, limits }, (stream) => {
      if (o.direct && isDirectInfer(stream.headers)) serveDirect(stream, o.direct);
      else (relay ??= new GrpcJsRelay(o.grpcJs)).serve(stream);
    });
    conns.add(conn);
    socket.once('close', () => {
      conns.delete(conn);
      relay?.close();
      if (conn.calmed || conn.dropped) penalty.strike(addr, performance.now());
    });
    socket.resume(); // accepted paused (pauseOnConnect)
  };
  const onSocket = (socket: net.Socket) => {
    const addr = socket.remoteAddress; // read now: a socket already closed has none
    const wait = penalty.delayMs(addr, performance.now());
    if (wait === 0) return serve(socket, addr);
    socket.on('error', () => undefined); // 'close' follows
    waiting.set(
      socket,
      setTimeout(() => {
        waiting.delete(socket);
        if (!socket.destroyed) serve(socket, addr);
      }, wait),
    );
    socket.once('close', () => {
      clearTimeout(waiting.get(socket));
      waiting.delete(socket);
    });
  };
  const listen = (target: { port: number; host: string } | { path: string }) =>
    new Promise<net.Server>((resolve, reject) => {
      const srv = net.createServer({ noDelay: true, pauseOnConnect: true }, onSocket);
      srv.once('error', reject);
      srv.listen(target, () => {
        srv.off('error', reject);
        resolve(srv);
      });
    });
  const servers: net.Server[] = [];
  if (o.tcp) servers.push(await listen(o.tcp));
  if (o.unixSocket) servers.push(await listen({ path: o.unixSocket }));
  const port = o.tcp ? (servers[0]!.address() as net.AddressInfo).port : 0;
  return {
    port,
    close: async () => {
      const closing = servers.map((s) => new Promise<void>((r) => s.close(() => r())));
      for (const c of conns) c.shutdown();
      for (const [socket, t] of waiting) {
        clearTimeout(t);
        socket.destroy();
      }
      const t = setTimeout(() => {
        for (const c of conns) c.destroy();
      }, 5000);
      await Promise.all(closing);
      clearTimeout(t);
    },
  };
}
