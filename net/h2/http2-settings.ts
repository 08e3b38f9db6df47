// HTTP/2 frame size and flow-control windows for gRPC, declared once: the
// engine's gRPC listener advertises them, the direct unary client advertises
// the windows for the answers it receives, and the bench's floor server
// copies them so only the server code differs.
//
// Why so large: Node's defaults are 16 KiB frames and 64 KiB windows (per
// stream and per connection). A tensor sent inline is then cut into 640 DATA
// frames per 10 MiB and stalls every 64 KiB for a WINDOW_UPDATE round trip;
// each stall and each frame is another trip through nghttp2 and the JS stream
// machinery. Measured (issue 14, round 2; interleaved A/B, 10 MiB FP32 inline
// from a grpc-js client, which follows the server's settings): engine CPU
// 36 ms per request with the defaults, 12 ms with these (latency 72-88 ->
// 31 ms).
//
// Cost: a receiver that holds a stream paused buffers what arrives up to the
// window: at most 16 MiB per stream and 32 MiB per connection, in place of
// 64 KiB. The gRPC message-size limits still cap each message.

/** Largest DATA frame we accept (HTTP/2 allows up to 2^24 - 1). */
export const MAX_FRAME_SIZE = 1 << 20;
/** Per-stream receive window: a 10 MiB tensor arrives without a WINDOW_UPDATE stall. */
export const STREAM_WINDOW = 16 << 20;
/** Per-connection receive window (shared by its streams). */
export const CONNECTION_WINDOW = 32 << 20;
