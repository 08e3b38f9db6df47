// Metrics of how the engine shares the machine among models: Triton's response
// cache families (nv_cache_*, only while a cache is configured, as Triton
// reports them), and our memory budget / on-demand loading families
// (nv_model_*; not Triton's). A view over ServerApi.sharingStatus(), read on
// each scrape like the inference counters.
import { Counter, Gauge, type Registry } from 'prom-client';
import type { ServerApi } from './server-api.ts';

const us = (ns: number) => Math.round(ns / 1000);

/** Register the sharing families on `registry` (they read `api` at scrape time). */
export function registerSharingMetrics(registry: Registry, api: ServerApi): void {
  const status = () => api.sharingStatus?.();
  const perModel: Array<[string, string, (s: ReturnType<ServerApi['modelStatistics']>[number]) => number]> = [
    ['nv_cache_num_hits_per_model', 'Number of response cache hits per model', (s) => s.inference_stats.cache_hit.count],
    ['nv_cache_num_misses_per_model', 'Number of response cache misses per model', (s) => s.inference_stats.cache_miss.count],
    ['nv_cache_hit_duration_per_model', 'Cumulative time requests spend retrieving a cached response per model on cache hits (microseconds)', (s) => us(s.inference_stats.cache_hit.ns)],
    ['nv_cache_miss_duration_per_model', 'Cumulative time requests spend looking up and inserting responses into the cache on cache misses (microseconds)', (s) => us(s.inference_stats.cache_miss.ns)],
  ];
  for (const [name, help, value] of perModel) {
    const c: Counter<'model' | 'version'> = new Counter({
      name, help, labelNames: ['model', 'version'], registers: [registry],
      collect() {
        c.reset();
        if (!status()?.cache) return;
        for (const s of api.modelStatistics()) c.inc({ model: s.name, version: s.version }, value(s));
      },
    });
  }
  const cacheGauges: Array<[string, string, (c: NonNullable<ReturnType<NonNullable<ServerApi['sharingStatus']>>['cache']>) => number]> = [
    ['nv_cache_num_entries', 'Number of responses stored in response cache', (c) => c.entries],
    ['nv_cache_num_lookups', 'Number of cache lookups in response cache', (c) => c.lookups],
    ['nv_cache_num_hits', 'Number of cache hits in response cache', (c) => c.hits],
    ['nv_cache_num_misses', 'Number of cache misses in response cache', (c) => c.misses],
    ['nv_cache_num_evictions', 'Number of cache evictions in response cache', (c) => c.evictions],
    ['nv_cache_util', 'Cache utilization [0.0 - 1.0]', (c) => (c.capacity ? c.bytes / c.capacity : 0)],
  ];
  for (const [name, help, value] of cacheGauges) {
    const g: Gauge = new Gauge({
      name, help, registers: [registry],
      collect() {
        g.reset();
        const c = status()?.cache;
        if (c) g.set(value(c));
      },
    });
  }
}
