// What one client may make the engine's own HTTP/2 server (h2-connection.ts)
// spend, each bound a named setting (`--grpc-h2-limit=NAME=VALUE`, repeatable;
// docs/engine/h2-front.md#conformance-and-defences lists them). The defaults
// are no looser than node:http2's and nghttp2's where they have one:
// nghttp2 allows 8 CONTINUATION frames per header block, a burst of 1000
// stream resets refilled at 33 per second, and 1000 queued control-frame
// replies; node:http2 128 header fields and 64 KiB of header list. The two
// per-turn budgets bound how long one connection's bytes hold the event loop
// (neither server has one: each handles a whole read at once). Neither has
// the reconnect penalty either (the last two): both give a peer that was just
// cut a fresh budget on its next connection at once.

export interface H2Limits {
  /** Decoded header list bytes (RFC 9113 §6.5.2: name + value + 32 per field), checked field by field while decoding; advertised. */
  maxHeaderListBytes: number;
  /** Header fields in one block, checked while decoding. */
  maxHeaderFields: number;
  /** CONTINUATION frames after one HEADERS. */
  maxContinuations: number;
  /** Streams open at once on one connection (SETTINGS_MAX_CONCURRENT_STREAMS, advertised; more get REFUSED_STREAM). */
  maxConcurrentStreams: number;
  /** Stream resets (by the client, or by us for its faults) a connection may burst; past it GOAWAY ENHANCE_YOUR_CALM. */
  resetBurst: number;
  /** Resets per second added back to that burst. */
  resetsPerSecond: number;
  /** Control-frame replies (PING and SETTINGS ACKs) queued behind a client that does not read; past it the connection is dropped. */
  maxQueuedControl: number;
  /**
   * PING and SETTINGS frames (the ones we must answer) a client may send with no HEADERS or DATA between them (as
   * gRPC C-core's ping strikes, more lenient); past it GOAWAY ENHANCE_YOUR_CALM and the close.
   */
  maxControlWithoutData: number;
  /** Bytes one connection may hold queued for its socket; past it the connection is dropped. */
  maxBufferedBytes: number;
  /** A connection with no open stream this long gets GOAWAY and is closed (0: never). */
  idleTimeoutMs: number;
  /** Frames handled in one turn of the event loop; the rest of the read waits a turn (setImmediate), the socket paused. */
  framesPerTurn: number;
  /** HEADERS and CONTINUATION payload bytes (HPACK to decode) handled in one turn; past it, likewise (a frame is never split). */
  headerBytesPerTurn: number;
  /**
   * A connection cut for a flood strikes its peer's address: the next one from it is read only this long after the
   * cut, doubled for each strike within a minute (h2-flood-penalty.ts; 0: never).
   */
  floodPenaltyMs: number;
  /** The most that wait grows to. */
  floodPenaltyMaxMs: number;
}

export const DEFAULT_H2_LIMITS: Readonly<H2Limits> = Object.freeze({
  maxHeaderListBytes: 64 << 10,
  maxHeaderFields: 128,
  maxContinuations: 8,
  maxConcurrentStreams: 1000,
  resetBurst: 1000,
  resetsPerSecond: 33,
  maxQueuedControl: 1000,
  maxControlWithoutData: 1000,
  maxBufferedBytes: 64 << 20,
  idleTimeoutMs: 300_000,
  framesPerTurn: 64,
  headerBytesPerTurn: 16 << 10,
  floodPenaltyMs: 100,
  floodPenaltyMaxMs: 5000,
});

/** The setting names as the flag spells them. */
export const H2_LIMIT_NAMES: Readonly<Record<string, keyof H2Limits>> = Object.freeze({
  'max-header-list-bytes': 'maxHeaderListBytes',
  'max-header-fields': 'maxHeaderFields',
  'max-continuations': 'maxContinuations',
  'max-concurrent-streams': 'maxConcurrentStreams',
  'reset-burst': 'resetBurst',
  'resets-per-second': 'resetsPerSecond',
  'max-queued-control': 'maxQueuedControl',
  'max-control-without-data': 'maxControlWithoutData',
  'max-buffered-bytes': 'maxBufferedBytes',
  'idle-timeout-ms': 'idleTimeoutMs',
  'frames-per-turn': 'framesPerTurn',
  'header-bytes-per-turn': 'headerBytesPerTurn',
  'flood-penalty-ms': 'floodPenaltyMs',
  'flood-penalty-max-ms': 'floodPenaltyMaxMs',
});

/** `NAME=VALUE` flags over the defaults; a name not listed or a value not a non-negative integer throws naming it. */
export function parseH2Limits(flags: readonly string[]): H2Limits {
  const out: H2Limits = { ...DEFAULT_H2_LIMITS };
  for (const f of flags) {
    const m = /^([a-z-]+)=(\d+)$/.exec(f);
    const key = m ? H2_LIMIT_NAMES[m[1]!] : undefined;
    if (!m || !key)
      throw new Error(`--grpc-h2-limit: expected NAME=INTEGER with NAME one of ${Object.keys(H2_LIMIT_NAMES).join(', ')}; got '${f}'`);
    const v = Number(m[2]);
    if (!Number.isSafeInteger(v) || (v === 0 && key !== 'idleTimeoutMs' && key !== 'floodPenaltyMs'))
      throw new Error(`--grpc-h2-limit: ${m[1]} must be a positive integer, got '${m[2]}'`);
    out[key] = v;
  }
  return out;
}
