// ModelStreamInfer's write pacing: Triton's --grpc-max-response-pool-size
// (responses handed to HTTP/2 and not yet taken, at most) and its
// TRITONSERVER_DELAY_GRPC_RESPONSE test hook (each write delayed; responses
// queued meanwhile go with it), on a fake writer and fake timers.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { pacingActive, StreamResponsePacer } from '../../engine/frontends/grpc/stream-response-pacer.ts';

function writer() {
  const written: string[] = [];
  const pending: Array<() => void> = [];
  return { written, pending, write: (m: string, taken: () => void) => (written.push(m), pending.push(taken)) };
}

describe('StreamResponsePacer', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('--grpc-max-response-pool-size=1: one response in flight; the next goes, in order, once HTTP/2 took it', () => {
    const w = writer();
    const taken: string[] = [];
    const p = new StreamResponsePacer<string>({ maxResponsePoolSize: 1 }, w.write);
    for (const m of ['a', 'b', 'c']) p.push(m, () => taken.push(m));
    expect(w.written).toEqual(['a']);
    w.pending.shift()!();
    expect([w.written, taken]).toEqual([['a', 'b'], ['a']]);
    w.pending.shift()!();
    w.pending.shift()!();
    expect([w.written, taken]).toEqual([
      ['a', 'b', 'c'],
      ['a', 'b', 'c'],
    ]);
  });

  it('TRITONSERVER_DELAY_GRPC_RESPONSE: a write waits the delay; responses queued meanwhile go with it; the next waits again', () => {
    const w = writer();
    const p = new StreamResponsePacer<string>({ delayMs: 2000 }, w.write);
    p.push('a', () => undefined);
    vi.advanceTimersByTime(1000);
    p.push('b', () => undefined);
    expect(w.written).toEqual([]);
    vi.advanceTimersByTime(1000);
    expect(w.written).toEqual(['a', 'b']);
    p.push('c', () => undefined);
    vi.advanceTimersByTime(1999);
    expect(w.written).toEqual(['a', 'b']);
    vi.advanceTimersByTime(1);
    expect(w.written).toEqual(['a', 'b', 'c']);
  });

  it('both: after the delay, the pool bound still holds; the stream ends only once nothing waits', () => {
    const w = writer();
    const p = new StreamResponsePacer<string>({ delayMs: 10, maxResponsePoolSize: 1 }, w.write);
    let ended = false;
    p.push('a', () => undefined);
    p.push('b', () => undefined);
    p.whenIdle(() => (ended = true));
    vi.advanceTimersByTime(10);
    expect([w.written, ended]).toEqual([['a'], false]);
    w.pending.shift()!();
    expect([w.written, ended]).toEqual([['a', 'b'], true]);
  });

  it('a closed stream drops what waits and writes nothing more', () => {
    const w = writer();
    const p = new StreamResponsePacer<string>({ delayMs: 10 }, w.write);
    p.push('a', () => undefined);
    p.close();
    p.push('b', () => undefined);
    vi.advanceTimersByTime(100);
    expect(w.written).toEqual([]);
  });

  it('is off unless a delay or a pool bound is set', () => {
    expect([pacingActive(undefined), pacingActive({}), pacingActive({ delayMs: 0 }), pacingActive({ maxResponsePoolSize: 1 })]).toEqual([
      false,
      false,
      false,
      true,
    ]);
  });
});
