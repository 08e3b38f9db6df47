// The bench's closed loop: a window shorter than one call stretches until
// every client has completed one call in it, and the rate is over the
// stretched window (a quick bench run on a loaded host must still measure).
import { describe, expect, it } from 'vitest';
import { closedLoop } from '../bench/load-generator.ts';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

describe('closedLoop', () => {
  it('stretches a window shorter than one call until each client completed one, rate over the stretched window', async () => {
    const r = await closedLoop({ concurrency: 3, warmupMs: 10, durationMs: 20, call: () => sleep(120) });
    expect(r.requests).toBeGreaterThanOrEqual(3);
    expect(r.seconds).toBeGreaterThan(0.08);
    expect(r.throughput).toBeCloseTo(r.requests / r.seconds, 6);
    expect(r.p50).toBeGreaterThanOrEqual(100);
  });

  it('keeps the window as given when calls are fast', async () => {
    const r = await closedLoop({ concurrency: 2, warmupMs: 10, durationMs: 150, call: () => sleep(5) });
    expect(r.seconds).toBeCloseTo(0.15, 6);
    expect(r.requests).toBeGreaterThan(10);
  });
});
