// Larger HTTP/2 frames and flow-control windows for the engine's gRPC server.
//
// grpc-js creates its http2 server with Node's defaults: SETTINGS_MAX_FRAME_SIZE
// 16 KiB and 64 KiB windows (per stream and per connection). A client sending
// a tensor inline then cuts a 10 MiB message into 640 DATA frames and stalls
// every 64 KiB for a WINDOW_UPDATE round trip; each stall and each frame is
// another trip through nghttp2 and the JS stream machinery on the engine's
// main thread. Measured (issue 14, round 2; interleaved A/B, 10 MiB FP32
// inline from a grpc-js client, which follows the server's settings): engine
// CPU 36 ms per request with the defaults, 12 ms with 1 MiB frames and
// 16 MiB stream / 32 MiB connection windows (latency 72-88 -> 31 ms).
//
// Cost: while grpc-js holds a stream paused (before its handler starts, and
// after each whole message until it is handled), Node buffers what arrives
// up to the window: at most 16 MiB per stream and 32 MiB per connection, in
// place of 64 KiB. grpc.max_receive_message_length still caps each message.
//
// grpc-js (1.14) passes only maxConcurrentStreams to http2.createServer and
// has no option for these, so this sets its `commonServerOptions.settings`
// before bind and widens each new session's connection window. Both are
// checked for shape first; a grpc-js that changed them keeps Node's defaults.
import type * as grpc from '@grpc/grpc-js';
import type { Http2Server, ServerHttp2Session, Settings } from 'node:http2';
import { log } from '../../../common/logger.ts';

/** Largest DATA frame we accept (HTTP/2 allows up to 2^24 - 1). */
export const MAX_FRAME_SIZE = 1 << 20;
/** Per-stream receive window: a 10 MiB tensor arrives without a WINDOW_UPDATE stall. */
export const STREAM_WINDOW = 16 << 20;
/** Per-connection receive window (shared by its streams). */
export const CONNECTION_WINDOW = 32 << 20;

interface GrpcServerInternals {
  commonServerOptions?: { settings?: Settings };
  http2Servers?: Map<Http2Server, unknown>;
}

/** Call before bindAsync: the settings every http2 server grpc-js creates will advertise. */
export function widenSettings(server: grpc.Server): boolean {
  const s = server as unknown as GrpcServerInternals;
  if (!s.commonServerOptions || typeof s.commonServerOptions !== 'object') {
    log.info('grpc-js Server has no commonServerOptions: HTTP/2 frames and windows stay at Node defaults');
    return false;
  }
  s.commonServerOptions.settings = { ...s.commonServerOptions.settings, maxFrameSize: MAX_FRAME_SIZE, initialWindowSize: STREAM_WINDOW };
  return true;
}

/** Call after bindAsync: widen the connection window of every session the bound servers accept. */
export function widenConnectionWindows(server: grpc.Server): boolean {
  const servers = (server as unknown as GrpcServerInternals).http2Servers;
  if (!(servers instanceof Map)) return false;
  for (const h2 of servers.keys()) {
    if (typeof h2?.on !== 'function') continue;
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
  return true;
}
