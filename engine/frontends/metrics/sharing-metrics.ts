// Metrics of how the engine shares the machine among models: Triton's response
// cache families (nv_cache_*, only while a cache is configured, as Triton
// reports them), and our memory budget / on-demand loading families
// (nv_model_*; not Triton's). A view over ServerApi.sharingStatus(), read on
// each scrape like the inference counters.
import { Counter, Gauge, type Registry } from 'prom-client';
import type { ServerApi } from '../../api/server-api.ts';

const us = (ns: number) => Math.round(ns / 1000);

/** Register the sharing families on `registry` (they read `api` at scrape time). */
export function registerSharingMetrics(registry: Registry, api: ServerApi): void {
  registerBudgetMetrics(registry, api);
  const status = () => api.sharingStatus?.();
  const perModel: Array<[string, string, (s: ReturnType<ServerApi['modelStatistics']>[number]) => number]> = [
    ['nv_cache_num_hits_per_model', 'Number of response cache hits per model', (s) => s.inference_stats.cache_hit.count],
    ['nv_cache_num_misses_per_model', 'Number of response cache misses per model', (s) => s.inference_stats.cache_miss.count],
    [
      'nv_cache_hit_duration_per_model',
      'Cumulative time requests spend retrieving a cached response per model on cache hits (microseconds)',
      (s) => us(s.inference_stats.cache_hit.ns),
    ],
    [
      'nv_cache_miss_duration_per_model',
      'Cumulative time requests spend looking up and inserting responses into the cache on cache misses (microseconds)',
      (s) => us(s.inference_stats.cache_miss.ns),
    ],
  ];
  for (const [name, help, value] of perModel) {
    const c: Counter<'model' | 'version'> = new Counter({
      name,
      help,
      labelNames: ['model', 'version'],
      registers: [registry],
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
      name,
      help,
      registers: [registry],
      collect() {
        g.reset();
        const c = status()?.cache;
        if (c) g.set(value(c));
      },
    });
  }
}

/** Our memory budget families (only with --model-memory-budget). */
export function registerBudgetMetrics(registry: Registry, api: ServerApi): void {
  const budget = () => api.sharingStatus?.().budget;
  const totals: Array<[string, string, (b: NonNullable<ReturnType<typeof budget>>) => number]> = [
    ['nv_model_memory_budget_bytes', 'Memory budget of the loaded models, in bytes (--model-memory-budget)', (b) => b.budgetBytes],
    ['nv_model_memory_used_bytes', 'Bytes of the budget charged to loaded models', (b) => b.usedBytes],
    ['nv_model_load_count', 'Model loads charged against the budget', (b) => b.loads],
    ['nv_model_load_failure_count', 'Model loads refused or failed under the budget', (b) => b.loadFailures],
    ['nv_model_eviction_count', 'Models unloaded to make room within the budget', (b) => b.evictions],
    ['nv_model_load_duration_us', 'Cumulative duration of budgeted model loads, in microseconds', (b) => us(b.loadNsTotal)],
    [
      'nv_model_memory_unattributed_bytes',
      'Engine RSS above its empty baseline that no loaded model is charged with (counts against the budget)',
      (b) => b.unattributedBytes,
    ],
    ['nv_model_memory_baseline_rss_bytes', 'Engine RSS with no model loaded (the budget measures above it)', (b) => b.baselineRssBytes],
  ];
  for (const [name, help, value] of totals) {
    const g: Gauge = new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        g.reset();
        const b = budget();
        if (b) g.set(value(b));
      },
    });
  }
  type M = NonNullable<ReturnType<typeof budget>>['models'][number];
  // [name, help, value, only while resident]
  const perModel: Array<[string, string, (m: M) => number, boolean]> = [
    ['nv_model_resident_bytes', 'Bytes charged to this loaded model now: at load plus growth seen while it ran', (m) => m.bytes, true],
    ['nv_model_load_resident_bytes', 'Bytes charged to this loaded model when its load and warmup finished', (m) => m.loadBytes, true],
    [
      'nv_model_load_rss_delta_bytes',
      "Engine RSS growth across this model's load and warmup (0 when another load overlapped it)",
      (m) => m.rssDeltaBytes,
      true,
    ],
    [
      'nv_model_external_resident_bytes',
      "RSS of the model's own processes (Python stubs), part of its charge",
      (m) => m.externalBytes,
      true,
    ],
    ['nv_model_cold_load_count', 'Budgeted loads of this model when it was not resident', (m) => m.coldLoads, false],
    [
      'nv_model_cold_load_duration_us',
      'Cumulative duration of those loads (room, load and warmup), in microseconds',
      (m) => us(m.coldLoadNsTotal),
      false,
    ],
    ['nv_model_evictions_caused_count', 'Models evicted to make room for this one', (m) => m.evictionsCaused, false],
    ['nv_model_evicted_count', 'Times this model was evicted for the budget', (m) => m.evicted, false],
  ];
  for (const [name, help, value, residentOnly] of perModel) {
    const g: Gauge<'model'> = new Gauge({
      name,
      help,
      labelNames: ['model'],
      registers: [registry],
      collect() {
        g.reset();
        for (const m of budget()?.models ?? []) if (m.resident || !residentOnly) g.set({ model: m.name }, value(m));
      },
    });
  }
}
