// Prometheus metrics of one gateway (prom-client, own registry): per-function
// call counts and latency, bytes staged through shm, leases held, arena use,
// engine and lease-store reachability. Gauges read their values at scrape.
//
// Ownership: owns its Registry; event loop only.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface MetricsSources {
  arena?: () => { leasesHeld: number; bytesInUse: number; capacity: number; staging: boolean; shmExhausted: boolean };
  engineUp: () => boolean;
  storeUp: () => boolean;
  reaped?: () => number;
  /** ModelInfer calls sent over the engine's local channel. */
  localCalls?: () => number;
  /** In-flight /fn calls and refusals (call-admission.ts). */
  admission?: { inFlight: number; refused: { connection: number; total: number } };
}

export class GatewayMetrics {
  readonly registry = new Registry();
  readonly calls: Counter<'function' | 'code' | 'transfer'>;
  readonly latency: Histogram<'function' | 'transfer'>;
  readonly stagedBytes: Counter<'direction'>;
  readonly inlineBytes: Counter<'direction'>;
  readonly stagingFallback: Counter<'reason'>;
  readonly shmExhausted: Counter<'outcome'>;

  constructor(src: MetricsSources, defaults = false) {
    const registers = [this.registry];
    this.calls = new Counter({
      name: 'gateway_function_calls_total',
      help: 'Calls of POST /fn/<name> by function, HTTP status and payload transfer',
      labelNames: ['function', 'code', 'transfer'],
      registers,
    });
    this.latency = new Histogram({
      name: 'gateway_function_duration_seconds',
      help: 'Time from request to reply of POST /fn/<name>',
      labelNames: ['function', 'transfer'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.stagedBytes = new Counter({
      name: 'gateway_staged_bytes_total',
      help: 'Bytes that travelled to/from the engine through shm staging slices',
      labelNames: ['direction'],
      registers,
    });
    this.inlineBytes = new Counter({
      name: 'gateway_inline_bytes_total',
      help: 'Bytes that travelled to/from the engine inline in gRPC messages',
      labelNames: ['direction'],
      registers,
    });
    this.stagingFallback = new Counter({
      name: 'gateway_staging_fallback_inline_total',
      help: 'Calls above the staging threshold sent inline because no staging slice was free, by why (shm_exhausted, unavailable, no_room)',
      labelNames: ['reason'],
      registers,
    });
    this.shmExhausted = new Counter({
      name: 'gateway_shm_exhausted_total',
      help: 'Calls that wanted staging while shared memory was exhausted, by outcome (inline: sent inline; refused: 503 SHM_EXHAUSTED)',
      labelNames: ['outcome'],
      registers,
    });
    registerSourceGauges(src, registers);
    if (src.admission) registerAdmissionGauges(src.admission, registers);
    if (defaults) collectDefaultMetrics({ register: this.registry, prefix: 'gateway_' });
  }

  /** The labelled children per (function, code, transfer), so a call does not hash its labels twice (prom-client's labels()). */
  private readonly children = new Map<string, { calls: { inc(): void }; latency: { observe(v: number): void } }>();

  /** The byte counters' children by transfer and direction, made at first use (a series appears with its first call, as before). */
  private readonly byteChildren: Record<string, { inc(v: number): void }> = {};

  /** Bytes one call sent to (`inBytes`) and received from (`outBytes`) the engine, staged or inline. */
  payloadBytes(staged: boolean, inBytes: number, outBytes: number): void {
    this.byteChild(staged, 'in').inc(inBytes);
    this.byteChild(staged, 'out').inc(outBytes);
  }

  private byteChild(staged: boolean, direction: 'in' | 'out'): { inc(v: number): void } {
    const k = `${staged ? 'shm' : 'inline'}-${direction}`;
    let c = this.byteChildren[k];
    if (!c) {
      c = (staged ? this.stagedBytes : this.inlineBytes).labels({ direction });
      this.byteChildren[k] = c;
    }
    return c;
  }

  /** Record one finished call. */
  observe(fn: string, code: number, transfer: string, seconds: number): void {
    const key = `${fn}\u0000${code}\u0000${transfer}`;
    let c = this.children.get(key);
    if (!c) {
      c = {
        calls: this.calls.labels({ function: fn, code: String(code), transfer }),
        latency: this.latency.labels({ function: fn, transfer }),
      };
      this.children.set(key, c);
    }
    c.calls.inc();
    c.latency.observe(seconds);
  }
}

/** A gauge read at scrape from one of the gateway's parts. */
interface SourceGauge {
  name: string;
  help: string;
  read(src: MetricsSources): number;
}

/** The gauges every gateway has, in the order /metrics lists them. */
const SOURCE_GAUGES: readonly SourceGauge[] = [
  {
    name: 'gateway_staging_shm_exhausted',
    help: '1 while a staging region could not be reserved because shared memory (/dev/shm) is full',
    read: (s) => (s.arena?.().shmExhausted ? 1 : 0),
  },
  { name: 'gateway_leases_held', help: 'Region leases this gateway holds', read: (s) => s.arena?.().leasesHeld ?? 0 },
  { name: 'gateway_arena_bytes_in_use', help: 'Bytes of the staging arena handed out to calls', read: (s) => s.arena?.().bytesInUse ?? 0 },
  { name: 'gateway_arena_capacity_bytes', help: 'Total bytes of the staging arena', read: (s) => s.arena?.().capacity ?? 0 },
  {
    name: 'gateway_staging_enabled',
    help: '1 while large payloads are staged through shm, 0 while they go inline',
    read: (s) => (s.arena?.().staging ? 1 : 0),
  },
  { name: 'gateway_engine_up', help: '1 while the engine answers', read: (s) => (s.engineUp() ? 1 : 0) },
  { name: 'gateway_lease_store_up', help: '1 while the lease store is reachable', read: (s) => (s.storeUp() ? 1 : 0) },
  { name: 'gateway_regions_reaped', help: 'Regions of dead owners this gateway has cleaned up', read: (s) => s.reaped?.() ?? 0 },
  {
    name: 'gateway_engine_local_channel_calls',
    help: 'ModelInfer calls sent to the engine over its local channel (the rest went over gRPC)',
    read: (s) => s.localCalls?.() ?? 0,
  },
];

/** Register each of SOURCE_GAUGES, reading `src` at scrape. */
function registerSourceGauges(src: MetricsSources, registers: Registry[]): void {
  for (const g of SOURCE_GAUGES) {
    new Gauge({
      name: g.name,
      help: g.help,
      registers,
      collect() {
        this.set(g.read(src));
      },
    });
  }
}

/** In-flight calls and busy refusals, read from call admission at scrape. */
function registerAdmissionGauges(admission: NonNullable<MetricsSources['admission']>, registers: Registry[]): void {
  new Gauge({
    name: 'gateway_calls_in_flight',
    help: '/fn calls in flight in this gateway (both HTTP/1.1 fronts)',
    registers,
    collect() {
      this.set(admission.inFlight);
    },
  });
  new Gauge({
    name: 'gateway_calls_refused_busy',
    help: 'Requests refused with 503 GATEWAY_BUSY, by the bound that refused them (per connection queue, or per gateway)',
    labelNames: ['scope'],
    registers,
    collect() {
      this.set({ scope: 'connection' }, admission.refused.connection);
      this.set({ scope: 'gateway' }, admission.refused.total);
    },
  });
}
