import { afterEach, describe, expect, it } from 'vitest';
import { createMetricsRegistry, startMetricsServer } from '../../engine/frontends/metrics/metrics.ts';
import type { ModelStatistics, ServerApi } from '../../engine/api/server-api.ts';

const d = (count: number, ns: number) => ({ count, ns });
function stats(name: string, version: string, n: number): ModelStatistics {
  return {
    name,
    version,
    last_inference: 0,
    inference_count: n * 2,
    execution_count: n,
    inference_stats: {
      success: d(n, n * 5_000_000),
      fail: d(1, 10),
      queue: d(n, 3_000),
      compute_input: d(n, 2_000),
      compute_infer: d(n, 7_000_000),
      compute_output: d(n, 1_000),
      cache_hit: d(0, 0),
      cache_miss: d(0, 0),
    },
    batch_stats: [],
    memory_usage: [],
  };
}

/** Only modelStatistics is read by the metrics module. */
function fakeApi(current: () => ModelStatistics[]): ServerApi {
  return { modelStatistics: () => current() } as unknown as ServerApi;
}

const value = (text: string, metric: string, model: string, version: string): number | undefined => {
  const line = text.split('\n').find((l) => l.startsWith(`${metric}{model="${model}",version="${version}"}`));
  return line === undefined ? undefined : Number(line.split(' ').pop());
};

describe('metrics registry', () => {
  it('exposes Triton counters per model/version from the statistics read at scrape time', async () => {
    let current = [stats('simple', '1', 3), stats('other', '2', 10)];
    const reg = createMetricsRegistry(fakeApi(() => current));
    let text = await reg.metrics();
    expect(text).toContain('# TYPE nv_inference_count counter');
    expect(value(text, 'nv_inference_count', 'simple', '1')).toBe(6);
    expect(value(text, 'nv_inference_exec_count', 'other', '2')).toBe(10);
    expect(value(text, 'nv_inference_request_success', 'simple', '1')).toBe(3);
    // Without per-reason counts from the server every failure is OTHER, in Triton's label order.
    expect(text).toContain('nv_inference_request_failure{model="simple",reason="OTHER",version="1"} 1');
    expect(value(text, 'nv_inference_request_duration_us', 'simple', '1')).toBe(15_000);
    expect(value(text, 'nv_inference_queue_duration_us', 'other', '2')).toBe(3);
    expect(value(text, 'nv_inference_compute_infer_duration_us', 'simple', '1')).toBe(7_000);
    expect(value(text, 'nv_inference_compute_input_duration_us', 'simple', '1')).toBe(2);
    expect(value(text, 'nv_inference_compute_output_duration_us', 'simple', '1')).toBe(1);
    // Counts move with the engine's statistics; unloaded models disappear.
    current = [stats('simple', '1', 4)];
    text = await reg.metrics();
    expect(value(text, 'nv_inference_count', 'simple', '1')).toBe(8);
    expect(value(text, 'nv_inference_count', 'other', '2')).toBeUndefined();
  });

  it("nv_inference_request_failure: every reason of every version, 0 until it happens (Triton's four reasons)", async () => {
    const api = {
      modelStatistics: () => [stats('m', '1', 1)],
      failureReasons: () => [{ name: 'm', version: '1', reasons: { REJECTED: 2, CANCELED: 0, BACKEND: 5, OTHER: 1 } }],
    } as unknown as ServerApi;
    const text = await createMetricsRegistry(api).metrics();
    const lines = text.split('\n').filter((l) => l.startsWith('nv_inference_request_failure{'));
    expect(lines).toEqual([
      'nv_inference_request_failure{model="m",reason="REJECTED",version="1"} 2',
      'nv_inference_request_failure{model="m",reason="CANCELED",version="1"} 0',
      'nv_inference_request_failure{model="m",reason="BACKEND",version="1"} 5',
      'nv_inference_request_failure{model="m",reason="OTHER",version="1"} 1',
    ]);
  });

  it('reports CPU utilization in [0,1] and memory gauges', async () => {
    const reg = createMetricsRegistry(fakeApi(() => []));
    await reg.metrics();
    const text = await reg.metrics();
    const g = (n: string) =>
      Number(
        text
          .split('\n')
          .find((l) => l.startsWith(`${n} `))!
          .split(' ')[1],
      );
    expect(g('nv_cpu_utilization')).toBeGreaterThanOrEqual(0);
    expect(g('nv_cpu_utilization')).toBeLessThanOrEqual(1);
    expect(g('nv_cpu_memory_total_bytes')).toBeGreaterThan(g('nv_cpu_memory_used_bytes'));
    expect(g('nv_cpu_memory_used_bytes')).toBeGreaterThan(0);
  });
});

describe('startMetricsServer', () => {
  let close: (() => Promise<void>) | undefined;
  afterEach(async () => close?.());

  it('serves GET /metrics on an ephemeral port and 404s elsewhere', async () => {
    const srv = await startMetricsServer(
      fakeApi(() => [stats('simple', '1', 2)]),
      { port: 0, host: '127.0.0.1' },
    );
    close = srv.close;
    expect(srv.port).toBeGreaterThan(0);
    const res = await fetch(`http://127.0.0.1:${srv.port}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    expect(value(await res.text(), 'nv_inference_count', 'simple', '1')).toBe(4);
    const nf = await fetch(`http://127.0.0.1:${srv.port}/nope`);
    expect(nf.status).toBe(404);
    expect(((await nf.json()) as { error: string }).error).toContain('/nope');
  });
});
