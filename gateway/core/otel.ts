// OpenTelemetry spans of the gateway: one SERVER span per /fn call (child of
// the caller's W3C traceparent when given), whose context goes to the engine
// as gRPC `traceparent` metadata, so one trace runs gateway -> ensemble ->
// steps -> model executions. Exported over OTLP/HTTP by the OpenTelemetry JS
// SDK. Off unless an OTLP traces URL is configured.
import { trace, ROOT_CONTEXT, SpanKind, SpanStatusCode, type Span } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';

const propagator = new W3CTraceContextPropagator();
const getter = { get: (c: Record<string, string>, k: string) => c[k], keys: (c: Record<string, string>) => Object.keys(c) };
const setter = { set: (c: Record<string, string>, k: string, v: string) => void (c[k] = v) };

/** A call's span and the traceparent that names it. */
export interface CallSpan {
  traceparent: string;
  end(status: number): void;
}

export class GatewayTracing {
  private readonly provider: TracerProvider;
  private readonly tracer;

  constructor(url: string, serviceName = 'triton-gateway') {
    this.provider = new TracerProvider({
      resource: resourceFromAttributes({ 'service.name': serviceName }),
      spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url }), scheduledDelayMillis: 200 })],
    });
    this.tracer = this.provider.getTracer('gateway');
  }

  /** Start the span of one /fn call. */
  startCall(fn: string, requestId: string, incoming: string | undefined): CallSpan {
    const parent = incoming ? propagator.extract(ROOT_CONTEXT, { traceparent: incoming }, getter) : ROOT_CONTEXT;
    const span: Span = this.tracer.startSpan(
      `POST /fn/${fn}`,
      {
        kind: SpanKind.SERVER,
        attributes: { 'http.request.method': 'POST', 'http.route': '/fn/:name', 'gateway.function': fn, 'gateway.request_id': requestId },
      },
      parent,
    );
    const carrier: Record<string, string> = {};
    propagator.inject(trace.setSpan(ROOT_CONTEXT, span), carrier, setter);
    return {
      traceparent: carrier.traceparent!,
      end: (status) => {
        span.setAttribute('http.response.status_code', status);
        if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        span.end();
      },
    };
  }

  shutdown(): Promise<void> {
    return this.provider.shutdown();
  }
}
