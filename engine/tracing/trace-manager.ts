// Triton's request tracing (trace extension): the global and per-model trace
// settings (TraceSetting RPC, /v2/trace/setting), the sampling decision
// (level, rate, count), and where finished traces go: Triton's JSON file, or
// OpenTelemetry spans over OTLP/HTTP. Owns the settings, counters, file
// writers and the OpenTelemetry exporter; main thread.
import { RequestTrace } from '../api/request-trace.ts';
import type { InferRequest, InferResponse } from '../api/infer-request.ts';
import { TraceFileWriter } from './trace-file-writer.ts';
import { OtelTraceExporter } from './trace-otel.ts';
import { invalidArg, unsupported } from '../api/status.ts';
import { fileUnder } from '../api/client-paths.ts';

export type TraceSettings = Record<string, string[]>;

/** Triton's defaults; `opentelemetry_url` is where OTLP/HTTP spans go in opentelemetry mode. */
export const DEFAULT_TRACE_SETTINGS: TraceSettings = {
  trace_file: [''],
  trace_level: ['OFF'],
  trace_rate: ['1000'],
  trace_count: ['-1'],
  log_frequency: ['0'],
  trace_mode: ['triton'],
  opentelemetry_url: ['http://localhost:4318/v1/traces'],
};

const LEVELS = new Set(['OFF', 'TIMESTAMPS', 'TENSORS']);

/** Check one setting's values; returns them normalized. */
function checkSetting(k: string, v: string[]): string[] {
  const int = (min: number) => {
    const n = Number(v[0]);
    if (v.length !== 1 || !Number.isInteger(n) || n < min)
      throw invalidArg(`trace setting '${k}' must be an integer >= ${min}, got '${v.join(',')}'`);
    return [String(n)];
  };
  switch (k) {
    case 'trace_level': {
      const bad = v.find((x) => !LEVELS.has(x.toUpperCase()));
      if (bad !== undefined || !v.length)
        throw invalidArg(`trace setting 'trace_level' must be OFF, TIMESTAMPS or TENSORS, got '${v.join(',')}'`);
      return v.map((x) => x.toUpperCase());
    }
    case 'trace_rate':
      return int(1);
    case 'trace_count':
      return int(-1);
    case 'log_frequency':
      return int(0);
    case 'trace_mode':
      if (v.length !== 1 || !['triton', 'opentelemetry'].includes(v[0]!))
        throw invalidArg(`trace setting 'trace_mode' must be triton or opentelemetry`);
      return v;
    default:
      return v.slice(0, 1);
  }
}

/** Turn `--trace-config` values ("triton,file=/tmp/t.json", "rate=1", "mode=opentelemetry", "opentelemetry,url=...") into settings. */
export function traceSettingsFromFlags(flags: string[]): TraceSettings {
  const out: TraceSettings = {};
  for (const f of flags) {
    const parts = f.split(',');
    const mode = parts.length > 1 && !parts[0]!.includes('=') ? parts.shift()! : undefined;
    const [key, ...rest] = parts.join(',').split('=');
    const value = rest.join('=');
    if (!key || rest.length === 0) throw new Error(`--trace-config: expected [mode,]setting=value, got '${f}'`);
    const name =
      key === 'file'
        ? 'trace_file'
        : key === 'log-frequency' || key === 'log_frequency'
          ? 'log_frequency'
          : key === 'url' && mode === 'opentelemetry'
            ? 'opentelemetry_url'
            : ['level', 'rate', 'count', 'mode'].includes(key)
              ? `trace_${key}`
              : undefined;
    if (!name) throw new Error(`--trace-config: unknown setting '${mode ? `${mode},` : ''}${key}'`);
    if (name === 'trace_level') out.trace_level = [...(out.trace_level ?? []).filter((l) => l !== 'OFF'), value.toUpperCase()];
    else out[name] = [value];
  }
  for (const [k, v] of Object.entries(out)) {
    try {
      out[k] = checkSetting(k, v);
    } catch (err) {
      throw new Error(`--trace-config: ${(err as Error).message}`);
    }
  }
  return out;
}

const rootOf = (t: RequestTrace): RequestTrace => (t.parent ? rootOf(t.parent) : t);

/** Where clients may point traces: trace_file under `traceDir` only (none: never, as Triton). */
export interface TracePathPolicy {
  traceDir?: string;
}

export class TraceManager {
  private readonly global: TraceSettings;
  /** The file and exporter URL given at start: always allowed, and written as the operator named them. */
  private readonly startFile: string;
  private readonly startUrl: string;
  private readonly perModel = new Map<string, TraceSettings>();
  private readonly seen = new Map<string, number>();
  private readonly writers = new Map<string, TraceFileWriter>();
  private otel?: OtelTraceExporter;
  private nextId = 1;

  constructor(
    initial: TraceSettings = {},
    private readonly serviceName = 'triton-engine',
    private readonly paths: TracePathPolicy = {},
  ) {
    this.global = { ...DEFAULT_TRACE_SETTINGS, ...initial };
    this.startFile = this.global.trace_file![0]!;
    this.startUrl = this.global.opentelemetry_url![0]!;
  }

  /**
   * A client's trace_file / opentelemetry_url: Triton refuses both over the
   * network; ours takes a trace_file under --trace-dir, the start values,
   * '' (no file) and [] (clear).
   */
  private clientValue(k: string, v: string[]): string[] {
    if (k === 'trace_file') {
      if (!this.paths.traceDir) throw unsupported('trace file location can not be updated through network protocol');
      const f = v[0];
      if (f === undefined || f === '' || f === this.startFile) return v;
      return [fileUnder(this.paths.traceDir, f, 'trace_file', '--trace-dir')];
    }
    if (k === 'opentelemetry_url' && v.length && v[0] !== this.startUrl) {
      // The engine would POST traces wherever a client says: only the operator picks the collector (--trace-config).
      throw unsupported('opentelemetry url can not be updated through network protocol');
    }
    return v;
  }

  /** Current settings of a model (its overrides over the global ones), or the global ones. */
  settings(model?: string): TraceSettings {
    return { ...this.global, ...(model ? (this.perModel.get(model) ?? {}) : {}) };
  }

  /** Apply an update ([] clears a model's override); finished traces in buffered files are written first. */
  update(model: string | undefined, update: TraceSettings): TraceSettings {
    const checked: Array<[string, string[] | undefined]> = Object.entries(update).map(([k, v]) => {
      if (!(k in DEFAULT_TRACE_SETTINGS)) throw invalidArg(`unknown trace setting '${k}'`);
      const value = this.clientValue(k, v);
      return [k, value.length ? checkSetting(k, value) : undefined];
    });
    this.flush();
    const target = model ? (this.perModel.get(model) ?? {}) : this.global;
    for (const [k, v] of checked) {
      if (v) target[k] = v;
      else if (model) delete target[k];
      else target[k] = DEFAULT_TRACE_SETTINGS[k]!;
    }
    if (model) this.perModel.set(model, target);
    return this.settings(model);
  }

  /** A trace for this request when it is sampled (or its ensemble's is), else undefined. */
  begin(
    model: string,
    version: string,
    requestId: string | undefined,
    parent: RequestTrace | undefined,
    traceparent: string | undefined,
    startNs: bigint,
  ): RequestTrace | undefined {
    // Read the level without merging the settings: every request comes here, most untraced.
    const level = this.perModel.get(model)?.trace_level ?? this.global.trace_level ?? ['OFF'];
    if (!parent && (level.includes('OFF') || level.length === 0)) return undefined;
    const s = this.settings(model);
    if (!parent) {
      const scope = this.perModel.get(model)?.trace_rate || this.perModel.get(model)?.trace_count ? model : '';
      const n = this.seen.get(scope) ?? 0;
      this.seen.set(scope, n + 1);
      if (n % Number(s.trace_rate![0]) !== 0) return undefined;
      const count = Number(s.trace_count![0]);
      if (count === 0) return undefined;
      // trace_count counts down the traces still to collect, as Triton's does.
      if (count > 0) (this.perModel.get(model)?.trace_count ? this.perModel.get(model)! : this.global).trace_count = [String(count - 1)];
    }
    const t = new RequestTrace(
      this.nextId++,
      model,
      version,
      requestId,
      parent,
      parent ? undefined : traceparent,
      level.includes('TENSORS'),
    );
    if (this.modeOf(t) === 'opentelemetry') this.exporter(this.settings(rootOf(t).modelName)).begin(t, startNs);
    return t;
  }

  /**
   * Run `enqueue` for `req`, traced when sampled: REQUEST_START at arrival,
   * QUEUE_START now, compute activities from the scheduler's onExecuted,
   * REQUEST_END when it settles; the request's trace is what its ensemble
   * steps name as parent.
   */
  traced(req: InferRequest, version: string, enqueue: () => Promise<InferResponse>): Promise<InferResponse> {
    const arrival = req.arrivalNs ?? process.hrtime.bigint();
    const trace = this.begin(req.modelName, version, req.id, req.parentTrace, req.traceparent, arrival);
    // Untraced (the common case): no extra async frame around the request.
    return trace ? this.runTraced(req, trace, arrival, enqueue) : enqueue();
  }

  private async runTraced(
    req: InferRequest,
    trace: RequestTrace,
    arrival: bigint,
    enqueue: () => Promise<InferResponse>,
  ): Promise<InferResponse> {
    req.trace = trace;
    trace.mark('REQUEST_START', arrival);
    // Copies: the request's bytes may be handed to a worker or a shm region may go away.
    const keep = (t: InferResponse['outputs'][number]) => ({ ...t, data: Uint8Array.from(t.data) });
    if (trace.withTensors) for (const t of req.inputs) trace.tensors.push({ activity: 'TENSOR_QUEUE_INPUT', tensor: keep(t) });
    const prev = req.onExecuted;
    req.onExecuted = (t) => {
      trace.executed(t);
      prev?.(t);
    };
    trace.mark('QUEUE_START');
    try {
      const res = await enqueue();
      if (trace.withTensors) for (const t of res.outputs) trace.tensors.push({ activity: 'TENSOR_BACKEND_OUTPUT', tensor: keep(t) });
      return res;
    } catch (err) {
      trace.failed = true;
      throw err;
    } finally {
      this.end(trace);
    }
  }

  /** The request finished: mark REQUEST_END and hand the trace to its file or exporter. */
  end(t: RequestTrace): void {
    t.mark('REQUEST_END');
    const s = this.settings(rootOf(t).modelName);
    if (this.modeOf(t) === 'opentelemetry') {
      this.otel?.end(t);
      return;
    }
    const file = s.trace_file![0];
    if (!file) return;
    const freq = Number(s.log_frequency![0]);
    const key = `${file}\u0000${freq}`;
    let w = this.writers.get(key);
    // A file a client named (under --trace-dir) is never written through a link.
    if (!w) this.writers.set(key, (w = new TraceFileWriter(file, freq, file !== this.startFile)));
    w.add(t);
  }

  /** Ensemble steps follow their top-level request's settings. */
  private modeOf(t: RequestTrace): string {
    return this.settings(rootOf(t).modelName).trace_mode![0]!;
  }

  private exporter(s: TraceSettings): OtelTraceExporter {
    const url = s.opentelemetry_url![0]!;
    if (!this.otel || this.otel.opts.url !== url) {
      void this.otel?.shutdown();
      this.otel = new OtelTraceExporter({ url, serviceName: this.serviceName });
    }
    return this.otel;
  }

  /** Write buffered file traces (log_frequency 0) and send pending spans. */
  flush(): void {
    for (const w of this.writers.values()) w.flush();
    void this.otel?.flush();
  }

  async shutdown(): Promise<void> {
    for (const w of this.writers.values()) w.flush();
    await this.otel?.shutdown();
  }
}
