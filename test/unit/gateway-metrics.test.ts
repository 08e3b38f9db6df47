// gateway/core/metrics.ts: calls and latency by label, through the labelled
// children it keeps per (function, code, transfer).
import { describe, expect, it } from 'vitest';
import { GatewayMetrics } from '../../gateway/core/metrics.ts';

describe('GatewayMetrics.observe', () => {
  it('counts each label set apart, calls and latency alike', async () => {
    const m = new GatewayMetrics({ engineUp: () => true, storeUp: () => true });
    m.observe('a', 200, 'inline', 0.002);
    m.observe('a', 200, 'inline', 0.004);
    m.observe('a', 400, 'inline', 0.001);
    m.observe('b', 200, 'shm', 0.3);
    const text = await m.registry.metrics();
    expect(text).toContain('gateway_function_calls_total{function="a",code="200",transfer="inline"} 2');
    expect(text).toContain('gateway_function_calls_total{function="a",code="400",transfer="inline"} 1');
    expect(text).toContain('gateway_function_calls_total{function="b",code="200",transfer="shm"} 1');
    expect(text).toContain('gateway_function_duration_seconds_count{function="a",transfer="inline"} 3');
    expect(text).toContain('gateway_function_duration_seconds_sum{function="a",transfer="inline"} 0.007');
    expect(text).toContain('gateway_function_duration_seconds_bucket{le="0.5",function="b",transfer="shm"} 1');
    expect(text).toContain('gateway_function_duration_seconds_bucket{le="0.25",function="b",transfer="shm"} 0');
  });
});
