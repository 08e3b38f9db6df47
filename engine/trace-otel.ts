// OpenTelemetry mode of the engine's traces (Triton's --trace-config
// mode=opentelemetry): each traced request is an `InferRequest` span (its
// parent: the ensemble's span, or the caller's W3C traceparent), with the
// Triton activities as span events and a `compute` child span per model
// execution, exported over OTLP/HTTP by the OpenTelemetry JS SDK. Owns its
// tracer provider; main thread.
import { context, trace as otelTrace, ROOT_CONTEXT, SpanKind, SpanStatusCode, type Context, type HrTime, type Span } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import type { RequestTrace } from './request-trace.ts';

/** hrtime ns -> epoch time: measured once, so spans keep hrtime's order. */
const EPOCH_OFFSET_NS = BigInt(Date.now()) * 1_000_000n - process.hrtime.bigint();
export function hrToEpoch(ns: bigint): HrTime {
  const e = ns + EPOCH_OFFSET_NS;
  return [Number(e / 1_000_000_000n), Number(e % 1_000_000_000n)];
}

const propagator = new W3CTraceContextPropagator();
const getter = { get: (c: Record<string, string>, k: string) => c[k], keys: (c: Record<string, string>) => Object.keys(c) };

/** The context of an incoming W3C traceparent (ROOT when absent or malformed). */
export function contextFromTraceparent(traceparent: string | undefined): Context {
  if (!traceparent) return ROOT_CONTEXT;
  return propagator.extract(ROOT_CONTEXT, { traceparent }, getter);
}

export interface OtelOptions {
  /** OTLP/HTTP traces endpoint, e.g. http://localhost:4318/v1/traces. */
  url: string;
  serviceName?: string;
}

export class OtelTraceExporter {
  private readonly provider: TracerProvider;
  private readonly tracer;
  private readonly spans = new WeakMap<RequestTrace, Span>();

  constructor(readonly opts: OtelOptions) {
    this.provider = new TracerProvider({
      resource: resourceFromAttributes({ 'service.name': opts.serviceName ?? 'triton-engine' }),
      spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: opts.url }), scheduledDelayMillis: 200 })],
    });
    this.tracer = this.provider.getTracer('engine');
  }

  /** Open the request's span at REQUEST_START. */
  begin(t: RequestTrace, startNs: bigint): void {
    const parentSpan = t.parent ? this.spans.get(t.parent) : undefined;
    const ctx = parentSpan ? otelTrace.setSpan(context.active(), parentSpan) : contextFromTraceparent(t.traceparent);
    const span = this.tracer.startSpan(
      'InferRequest',
      {
        kind: t.parent ? SpanKind.INTERNAL : SpanKind.SERVER,
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
    const sc = span.spanContext();
    t.span = { traceId: sc.traceId, spanId: sc.spanId };
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
      const compute = this.tracer.startSpan('compute', { startTime: hrToEpoch(cs) }, otelTrace.setSpan(ROOT_CONTEXT, span));
      const ie = t.time('COMPUTE_INPUT_END');
      const os = t.time('COMPUTE_OUTPUT_START');
      if (ie !== undefined) compute.addEvent('COMPUTE_INPUT_END', hrToEpoch(ie));
      if (os !== undefined) compute.addEvent('COMPUTE_OUTPUT_START', hrToEpoch(os));
      compute.end(hrToEpoch(ce));
    }
    if (t.failed) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end(hrToEpoch(t.time('REQUEST_END') ?? process.hrtime.bigint()));
  }

  flush(): Promise<void> {
    return this.provider.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.provider.shutdown();
  }
}
