// Everything that configures one gateway: main.ts builds it from flags and
// the environment, server.ts and services.ts read it. Defaults are applied
// where each option is used.
import type { AdmissionLimits } from './http/call-admission.ts';
import type { HttpTimeouts } from './http/http-timeouts.ts';
import type { GatewayTransport } from './core/transport-options.ts';

export interface GatewayOptions {
  port?: number;
  host?: string;
  /** Engine gRPC address host:port. */
  engine?: string;
  /** Transport choices (core/transport-options.ts: fronts, local channel, engine HTTP address), built once by main.ts; defaults where not given. */
  transport?: Partial<GatewayTransport>;
  /** Retry delay of a failed local channel (ms). */
  engineLocalRetryMs?: number;
  /** Folder of function definitions (*.json). */
  functions?: string;
  redisUrl?: string;
  /** Bodies above this many bytes are staged through shm. */
  shmThreshold?: number;
  /** The largest payload sent inline when shared memory is exhausted; above it such a call is refused (503 SHM_EXHAUSTED). Default: the engine's gRPC message limit less 1 MiB. */
  maxInlineBytes?: number;
  /** OTLP/HTTP traces endpoint for a span per /fn call (default: GATEWAY_OTLP_URL; none = off). */
  otlpTracesUrl?: string;
  leaseTtlMs?: number;
  /** false: never stage (a remote engine); true by default. */
  shm?: boolean;
  arenaRegions?: number;
  arenaRegionBytes?: number;
  /** shm key / region name prefix shared by the gateways of one host. */
  prefix?: string;
  /** Redis key namespace of the leases (default `tgw:<hostname>`). */
  leaseNamespace?: string;
  /** Time allowed for in-flight calls at shutdown (ms). */
  drainMs?: number;
  /** Async jobs run at once by this gateway. */
  jobsConcurrency?: number;
  /** A job held this long by a silent runner is claimed by another (ms). */
  jobClaimIdleMs?: number;
  /** Accepted jobs kept in memory to put back if Redis restarts empty (jobs/job-journal.ts; default 10,000; 0: no journal). */
  jobJournalMax?: number;
  /** Without Redis: records the in-memory job store keeps at most (jobs/memory-job-queue.ts; default 10,000). */
  jobRecordsMax?: number;
  /** Seconds between glibc malloc_trim calls (native/allocator-trim.ts; default 60, 0: never); read by main.ts only. */
  allocatorTrimSecs?: number;
  /** Without Redis: estimated bytes of payloads and results the in-memory job store keeps at most (default 128 MiB). */
  jobRecordsMaxBytes?: number;
  /** Redis key namespace of jobs and deployed bundles, shared by all replicas (default `tgw`). */
  redisNamespace?: string;
  /** Serve the web console under /console (default true). */
  console?: boolean;
  /** The console's chart sampling interval (ms, default 2000). */
  consoleSampleMs?: number;
  /** A gateway silent this long is judged dead by the others (ms; default 3 × lease TTL). */
  presenceTtlMs?: number;
  /** Slow-client limits (http-timeouts.ts); each defaults to DEFAULT_HTTP_TIMEOUTS. */
  timeouts?: Partial<HttpTimeouts>;
  /** Rollout tick: counts pushed, store followed, gates judged (ms, default 200; delivery/). */
  rolloutTickMs?: number;
  /** How often usage plans are re-read from the store (ms, default 1000; plans/). */
  planPollMs?: number;
  /** How often the deployed bundle's version is re-read from Redis besides its change notices: what finds a FLUSHALL (ms, default 5000; deploy/). */
  deployPollMs?: number;
  /** Calls in flight per connection and per gateway (call-admission.ts); each defaults to DEFAULT_ADMISSION. */
  admission?: Partial<AdmissionLimits>;
}
