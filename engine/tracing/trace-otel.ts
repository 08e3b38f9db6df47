// OpenTelemetry mode of the engine's traces (Triton's --trace-config
// mode=opentelemetry): each traced request is an `InferRequest` span (its
// parent: the ensemble's span, or the caller's W3C traceparent), with the
// Triton activities as span events and a `compute` child span per model
// execution, exported over OTLP/HTTP by the OpenTelemetry JS SDK. Owns its
// tracer provider; main thread.
import { createRequire } from 'node:module';
import type { Context, HrTime, Span } from '@opentelemetry/api';
import type * as OtelApi from '@opentelemetry/api';
import type * as OtelCore from '@opentelemetry/core';
import type * as OtelResources from '@opentelemetry/resources';
import type * as OtelSdk from '@opentelemetry/sdk-trace';
import type * as OtelOtlp from '@opentelemetry/exporter-trace-otlp-http';
import type { RequestTrace } from '../api/request-trace.ts';

// The SDK (~20 MiB resident) is loaded on first use, not at engine start:
// most engines never trace in OpenTelemetry mode. Its packages ship CommonJS
// builds, so a synchronous require keeps the callers synchronous. The API
// keeps its registry and context keys global (Symbol.for), so this copy and
// an ESM import of it elsewhere in the process agree.
const load = createRequire(import.meta.url);
interface Otel {
  api: typeof OtelApi;
  core: typeof OtelCore;
  resources: typeof OtelResources;
  sdk: typeof OtelSdk;
  otlp: typeof OtelOtlp;
}
let loaded: Otel | undefined;
function otel(): Otel {
  return (loaded ??= {
    api: load('@opentelemetry/api') as typeof OtelApi,
    core: load('@opentelemetry/core') as typeof OtelCore,
    resources: load('@opentelemetry/resources') as typeof OtelResources,
    sdk: load('@opentelemetry/sdk-trace') as typeof OtelSdk,
    otlp: load('@opentelemetry/exporter-trace-otlp-http') as typeof OtelOtlp,
  });
}

/** hrtime ns -> epoch time: measured once, so spans keep hrtime's order. */
const EPOCH_OFFSET_NS = BigInt(Date.now()) * 1_000_000n - process.hrtime.bigint();
export function hrToEpoch(ns: bigint): HrTime {
  const e = ns + EPOCH_OFFSET_NS;
  return [Number(e / 1_000_000_000n), Number(e % 1_000_000_000n)];
}

let propagator: OtelCore.W3CTraceContextPropagator | undefined;
const getter = { get: (c: Record<string, string>, k: string) => c[k], keys: (c: Record<string, string>) => Object.keys(c) };

/** The context of an incoming W3C traceparent (ROOT when absent or malformed). */
export function contextFromTraceparent(traceparent: string | undefined): Context {
  const { api, core } = otel();
  if (!traceparent) return api.ROOT_CONTEXT;
  propagator ??= new core.W3CTraceContextPropagator();
  return propagator.extract(api.ROOT_CONTEXT, { traceparent }, getter);
}

export interface OtelOptions {
  /** OTLP/HTTP traces endpoint, e.g. http://localhost:4318/v1/traces. */
  url: string;
  serviceName?: string;
}

export class OtelTraceExporter {
  private readonly provider: OtelSdk.TracerProvider;
  private readonly tracer;
  private readonly spans = new WeakMap<RequestTrace, Span>();

  constructor(readonly opts: OtelOptions) {
    const { sdk, resources, otlp } = otel();
    this.provider = new sdk.TracerProvider({
      resource: resources.resourceFromAttributes({ 'service.name': opts.serviceName ?? 'triton-engine' }),
      spanProcessors: [new sdk.BatchSpanProcessor({ exporter: new otlp.OTLPTraceExporter({ url: opts.url }), scheduledDelayMillis: 200 })],
    });
    this.tracer = this.provider.getTracer('engine');
  }

  /** Open the request's span at REQUEST_START. */
  begin(t: RequestTrace, startNs: bigint): void {
    const parentSpan = t.parent ? this.spans.get(t.parent) : undefined;
    const { api } = otel();
    const ctx = parentSpan ? api.trace.setSpan(api.context.active(), parentSpan) : contextFromTraceparent(t.traceparent);
    const span = this.tracer.startSpan(
      'InferRequest',
      {
        kind: t.parent ? api.SpanKind.INTERNAL : api.SpanKind.SERVER,
        startTime: hrToEpoch(startNs),
        attributes: {
          'triton.model_name': t.modelName,
          'triton.model_version': Number(t.modelVersion),
          'triton.trace_id': t.id,
          ...(t.parent ? { 'triton.trace_parent_id': t.parent.id } : {}),
          ...(t.requestId ? { 'triton.request_id': t.requestId } : {}),
        },
      },
      ctx,
    );
    this.spans.set(t, span);
  }

  /** Close the span at REQUEST_END with the activities as events and the compute span. */
  end(t: RequestTrace): void {
    const span = this.spans.get(t);
    if (!span) return;
    for (const ts of t.timestamps) span.addEvent(ts.name, hrToEpoch(ts.ns));
    const cs = t.time('COMPUTE_START');
    const ce = t.time('COMPUTE_END');
    // An ensemble's compute is its steps', each with its own span.
    if (cs !== undefined && ce !== undefined && t.children === 0) {
      const compute = this.tracer.startSpan(
        'compute',
        { startTime: hrToEpoch(cs) },
        otel().api.trace.setSpan(otel().api.ROOT_CONTEXT, span),
      );
      const ie = t.time('COMPUTE_INPUT_END');
      const os = t.time('COMPUTE_OUTPUT_START');
      if (ie !== undefined) compute.addEvent('COMPUTE_INPUT_END', hrToEpoch(ie));
      if (os !== undefined) compute.addEvent('COMPUTE_OUTPUT_START', hrToEpoch(os));
      compute.end(hrToEpoch(ce));
    }
    if (t.failed) span.setStatus({ code: otel().api.SpanStatusCode.ERROR });
    span.end(hrToEpoch(t.time('REQUEST_END') ?? process.hrtime.bigint()));
  }

  flush(): Promise<void> {
    return this.provider.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.provider.shutdown();
  }
}
