// The own HTTP/2 front's reconnect penalty (net/h2/h2-flood-penalty.ts) on
// an injected clock: the wait after each strike, its cap, forgetting an
// address, the bound on addresses held, and the setting that turns it off.
// The same through a live engine: L0_h2_attacks ("flood-penalty-ms").
import { describe, expect, it } from 'vitest';
import { FloodPenalty, FORGET_MS } from '../../net/h2/h2-flood-penalty.ts';

describe('FloodPenalty', () => {
  it('an address never struck, or none (a Unix socket), is read at once', () => {
    const p = new FloodPenalty(100, 5000);
    expect(p.delayMs('10.0.0.1', 0)).toBe(0);
    p.strike(undefined, 0);
    expect([p.delayMs(undefined, 0), p.size]).toEqual([0, 0]);
  });

  it('waits base × 2^(strikes − 1) after the last strike, counted from the strike, up to the cap', () => {
    const p = new FloodPenalty(100, 500);
    p.strike('a', 1000);
    expect(p.delayMs('a', 1000)).toBe(100);
    expect(p.delayMs('a', 1060)).toBe(40); // time already waited counts
    expect(p.delayMs('a', 1100)).toBe(0);
    p.strike('a', 1200);
    expect(p.delayMs('a', 1200)).toBe(200);
    p.strike('a', 1400);
    expect(p.delayMs('a', 1400)).toBe(400);
    p.strike('a', 1800);
    expect(p.delayMs('a', 1800)).toBe(500); // 800, capped
    for (let i = 0; i < 100; i++) p.strike('a', 2000);
    expect(p.delayMs('a', 2000)).toBe(500); // no overflow however many strikes
    expect(p.delayMs('b', 2000)).toBe(0); // another address is not touched
  });

  it(`forgets an address ${FORGET_MS / 1000} s after its last strike: the next strike is a first one again`, () => {
    const p = new FloodPenalty(100, 5000);
    p.strike('a', 0);
    p.strike('a', 10);
    p.strike('a', 20);
    expect(p.delayMs('a', 20)).toBe(400);
    expect(p.delayMs('a', 20 + FORGET_MS)).toBe(0);
    expect(p.size).toBe(0);
    p.strike('a', 30 + FORGET_MS);
    expect(p.delayMs('a', 30 + FORGET_MS)).toBe(100);
  });

  it('holds at most maxAddresses, dropping the stalest strike first', () => {
    const p = new FloodPenalty(100, 5000, 3);
    for (const [i, a] of ['a', 'b', 'c'].entries()) p.strike(a, i);
    p.strike('a', 5); // 'a' struck again: now the freshest
    p.strike('d', 6);
    expect(p.size).toBe(3);
    expect(p.delayMs('b', 6)).toBe(0); // the stalest went
    expect(p.delayMs('a', 6)).toBeGreaterThan(0);
    expect(p.delayMs('c', 6)).toBeGreaterThan(0);
    for (let i = 0; i < 10_000; i++) p.strike(`10.${i >> 8}.${i & 255}.1`, 7);
    expect(p.size).toBe(3);
  });

  it('flood-penalty-ms=0 turns it off', () => {
    const p = new FloodPenalty(0, 5000);
    p.strike('a', 0);
    expect([p.delayMs('a', 0), p.size]).toEqual([0, 0]);
  });
});
