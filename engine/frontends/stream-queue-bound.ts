// The bound on a streaming reply's responses that wait for their client
// (generate_stream's server-sent events, ModelStreamInfer's messages). A
// decoupled model cannot be paused: it sends as fast as it runs. A client
// that stops reading would otherwise let every response pile up in the
// engine. Each stream may hold `limit` bytes of responses not yet taken by
// its client (written to the socket's buffers is taken); past that the
// stream's requests are cancelled down to the model, the reason is logged,
// later responses are dropped, and the client gets one final error if it
// ever reads again.
//
// Ownership: one StreamQueueBound per stream, used on the event loop only.
import { log } from '../../common/logger.ts';

/**
 * Default bytes of responses one stream may hold for a client that is not
 * reading (--stream-max-queued-bytes): room for a reader that pauses a
 * second or two on a fast model (a gateway reader stalled 1.5 s on 32 MiB
 * reads every response: L0_gateway_stream), still a bound per stream.
 */
export const DEFAULT_STREAM_MAX_QUEUED_BYTES = 64 * 1024 * 1024;

/** What every stream holds now, the most it ever held, and how many streams went past their bound (tests read it). */
export const streamQueueStats = { queuedBytes: 0, peakQueuedBytes: 0, overflows: 0 };

/** The client-facing text when a stream went past its bound. */
export function overflowMessage(queued: number, limit: number): string {
  return `the client did not read the stream's responses: ${queued} bytes waited, past the limit of ${limit} (--stream-max-queued-bytes); the request was cancelled`;
}

export class StreamQueueBound {
  private queued = 0;
  /** True once the stream went past its bound (its responses are dropped from then on). */
  overflowed = false;

  /**
   * @param limit bytes the stream may hold for its client
   * @param what the stream in log lines, e.g. "generate_stream for model 'm'"
   * @param onOverflow called once, with the client-facing reason, when the bound is passed: cancel the requests
   */
  constructor(
    private readonly limit: number,
    private readonly what: string,
    private readonly onOverflow: (reason: string) => void,
  ) {}

  /** `bytes` more would wait for the client. False when that passes the bound (or it was passed): drop them. */
  add(bytes: number): boolean {
    if (this.overflowed) return false;
    if (this.queued + bytes <= this.limit) {
      this.queued += bytes;
      streamQueueStats.queuedBytes += bytes;
      streamQueueStats.peakQueuedBytes = Math.max(streamQueueStats.peakQueuedBytes, streamQueueStats.queuedBytes);
      return true;
    }
    this.overflowed = true;
    streamQueueStats.overflows++;
    const reason = overflowMessage(this.queued + bytes, this.limit);
    log.warn(`${this.what}: cancelling: ${reason}`);
    this.onOverflow(reason);
    return false;
  }

  /** `bytes` were taken by the client (or its socket). */
  taken(bytes: number): void {
    const n = Math.min(bytes, this.queued);
    this.queued -= n;
    streamQueueStats.queuedBytes -= n;
  }

  /** The stream is gone: what still waited is freed with it. */
  close(): void {
    streamQueueStats.queuedBytes -= this.queued;
    this.queued = 0;
  }
}
