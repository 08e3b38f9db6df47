// Prometheus metrics (Triton's metrics endpoint, default port 8002). Owns a
// prom-client Registry whose collect() reads api.modelStatistics() on each
// scrape: the engine keeps one set of counters (its statistics), and the
// metric family is a view over them. Served at GET /metrics on node:http.
import { createServer, type Server } from 'node:http';
import os from 'node:os';
import { Counter, Gauge, Registry } from 'prom-client';
import type { ModelStatistics, ServerApi } from '../../api/server-api.ts';
import { FAILURE_REASONS } from '../../api/scheduler.ts';
import { log } from '../../../common/logger.ts';
import { listen, type RunningServer } from '../http/http-server.ts';
import { DEFAULT_HTTP_TIMEOUTS, handleClientErrors, timeoutServerOptions, type HttpTimeouts } from '../http/http-timeouts.ts';
import { registerSharingMetrics } from './sharing-metrics.ts';

type StatsField = (s: ModelStatistics) => number;
const us = (ns: number) => Math.round(ns / 1000);

/** Triton's per-model counters, each derived from the model's statistics. */
const MODEL_COUNTERS: Array<[name: string, help: string, value: StatsField]> = [
  ['nv_inference_request_success', 'Number of successful inference requests, all batch sizes', (s) => s.inference_stats.success.count],
  ['nv_inference_count', 'Number of inferences performed (does not include cached requests)', (s) => s.inference_count],
  ['nv_inference_exec_count', 'Number of model executions performed (does not include cached requests)', (s) => s.execution_count],
  [
    'nv_inference_request_duration_us',
    'Cumulative inference request duration in microseconds (includes cached requests)',
    (s) => us(s.inference_stats.success.ns),
  ],
  [
    'nv_inference_queue_duration_us',
    'Cumulative inference queuing duration in microseconds (includes cached requests)',
    (s) => us(s.inference_stats.queue.ns),
  ],
  [
    'nv_inference_compute_input_duration_us',
    'Cumulative compute input duration in microseconds (does not include cached requests)',
    (s) => us(s.inference_stats.compute_input.ns),
  ],
  [
    'nv_inference_compute_infer_duration_us',
    'Cumulative compute inference duration in microseconds (does not include cached requests)',
    (s) => us(s.inference_stats.compute_infer.ns),
  ],
  [
    'nv_inference_compute_output_duration_us',
    'Cumulative inference compute output duration in microseconds (does not include cached requests)',
    (s) => us(s.inference_stats.compute_output.ns),
  ],
];

/** Busy/total CPU time summed over all cores (for utilization between scrapes). */
function cpuTimes(): { busy: number; total: number } {
  let busy = 0;
  let total = 0;
  for (const c of os.cpus()) {
    const t = c.times;
    busy += t.user + t.nice + t.sys + t.irq;
    total += t.user + t.nice + t.sys + t.irq + t.idle;
  }
  return { busy, total };
}

/** A registry holding Triton's nv_inference_* and nv_cpu_* families over `api`. */
export function createMetricsRegistry(api: ServerApi): Registry {
  const registry = new Registry();
  for (const [name, help, value] of MODEL_COUNTERS) {
    const counter: Counter<'model' | 'version'> = new Counter({
      name,
      help,
      labelNames: ['model', 'version'],
      registers: [registry],
      collect() {
        counter.reset(); // unloaded models drop out
        for (const s of api.modelStatistics()) counter.inc({ model: s.name, version: s.version }, value(s));
      },
    });
  }

  // Triton's failure counter carries a `reason` label; every reason of every loaded version is
  // listed (0 until it happens), labels in Triton's order: model, reason, version.
  const failure: Counter<'model' | 'reason' | 'version'> = new Counter({
    name: 'nv_inference_request_failure',
    help: 'Number of failed inference requests, all batch sizes',
    labelNames: ['model', 'reason', 'version'],
    registers: [registry],
    collect() {
      failure.reset();
      const byReason = api.failureReasons?.();
      if (byReason) {
        for (const m of byReason) {
          for (const reason of FAILURE_REASONS) failure.inc({ model: m.name, reason, version: m.version }, m.reasons[reason]);
        }
        return;
      }
      // A server that does not tell reasons: all its failures as OTHER.
      for (const s of api.modelStatistics())
        failure.inc({ model: s.name, reason: 'OTHER', version: s.version }, s.inference_stats.fail.count);
    },
  });

  registerSharingMetrics(registry, api);

  let last = cpuTimes();
  new Gauge({
    name: 'nv_cpu_utilization',
    help: 'CPU utilization rate [0.0 - 1.0]',
    registers: [registry],
    collect() {
      const now = cpuTimes();
      const total = now.total - last.total;
      if (total > 0) this.set((now.busy - last.busy) / total);
      last = now;
    },
  });
  new Gauge({
    name: 'nv_cpu_memory_total_bytes',
    help: 'CPU total memory (RAM), in bytes',
    registers: [registry],
    collect() {
      this.set(os.totalmem());
    },
  });
  new Gauge({
    name: 'nv_cpu_memory_used_bytes',
    help: 'CPU used memory (RAM), in bytes',
    registers: [registry],
    collect() {
      this.set(os.totalmem() - os.freemem());
    },
  });
  return registry;
}

/** Start the metrics endpoint (Triton's Metrics Service): GET /metrics. */
export function startMetricsServer(api: ServerApi, opts: { port: number; host?: string; timeouts?: HttpTimeouts }): Promise<RunningServer> {
  const registry = createMetricsRegistry(api);
  const timeouts = opts.timeouts ?? DEFAULT_HTTP_TIMEOUTS;
  const server: Server = createServer(timeoutServerOptions(timeouts), (req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' || path !== '/metrics') {
      res.writeHead(404, { 'Content-Type': 'application/json' }).end(JSON.stringify({ error: `no endpoint for ${req.method} ${path}` }));
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'Content-Type': registry.contentType }).end(text),
      (err: unknown) => {
        log.error('metrics collection failed', err);
        res.writeHead(500, { 'Content-Type': 'application/json' }).end(JSON.stringify({ error: 'internal error' }));
      },
    );
  });
  handleClientErrors(server, timeouts, 'metrics');
  return listen(server, opts.port, opts.host);
}
