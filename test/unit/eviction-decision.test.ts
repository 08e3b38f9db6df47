import { describe, expect, it } from 'vitest';
import { chooseEvictions, parseBudget, type EvictionCandidate } from '../../engine/sharing/eviction-decision.ts';
import { MemoryBudget } from '../../engine/sharing/model-memory-budget.ts';

const c = (name: string, bytes: number, lastUsedMs: number, extra: Partial<EvictionCandidate> = {}): EvictionCandidate => ({
  name,
  bytes,
  lastUsedMs,
  busy: false,
  pinned: false,
  ...extra,
});

describe('chooseEvictions', () => {
  it('evicts nothing when the load fits', () => {
    expect(chooseEvictions([c('a', 10, 1)], 10, 10, 20)).toEqual({ evict: [], fits: true });
  });

  it('evicts least recently used idle models, only as many as needed', () => {
    const models = [c('a', 10, 3), c('b', 10, 1), c('c', 10, 2)];
    expect(chooseEvictions(models, 10, 30, 30)).toEqual({ evict: ['b'], fits: true });
    expect(chooseEvictions(models, 15, 30, 30)).toEqual({ evict: ['b', 'c'], fits: true });
  });

  it('never picks a busy or pinned model, and evicts nothing when room cannot be made', () => {
    const models = [c('a', 10, 1, { busy: true }), c('b', 10, 2, { pinned: true }), c('c', 10, 3)];
    expect(chooseEvictions(models, 10, 30, 30)).toEqual({ evict: ['c'], fits: true });
    expect(chooseEvictions(models, 20, 30, 30)).toEqual({ evict: [], fits: false });
  });
});

describe('parseBudget', () => {
  it('takes bytes or a percentage of total memory', () => {
    expect(parseBudget('1048576', 1000)).toBe(1048576);
    expect(parseBudget('50%', 1000)).toBe(500);
    expect(() => parseBudget('0', 1000)).toThrow(/--model-memory-budget/);
    expect(() => parseBudget('150%', 1000)).toThrow(/percentage/);
    expect(() => parseBudget('lots', 1000)).toThrow();
  });
});

describe('MemoryBudget', () => {
  it('keeps books of cost, use and counters, and plans with its own last-use record', () => {
    let now = 0;
    const b = new MemoryBudget(100, ['p'], () => now);
    b.loaded('a', { bytes: 40, rssDeltaBytes: 50, externalBytes: 0 }, 1000);
    now = 1;
    b.loaded('b', { bytes: 40, rssDeltaBytes: 0, externalBytes: 0 }, 1000);
    now = 2;
    b.begin('a'); // a is now the most recently used, and busy
    expect(b.inUse('a')).toBe(true);
    const cands = [c('a', 40, 0, { busy: b.inUse('a') }), c('b', 40, 0)];
    expect(b.plan(30, cands)).toEqual({ evict: ['b'], fits: true });
    b.end('a');
    expect(b.inUse('a')).toBe(false);
    expect(b.plan(30, [c('a', 40, 0), c('b', 40, 0)])).toEqual({ evict: ['b'], fits: true });
    b.unloaded('b', true);
    expect(b.status()).toMatchObject({ budgetBytes: 100, usedBytes: 40, loads: 2, evictions: 1, loadNsTotal: 2000 });
    expect(b.pinnedByFlag('p')).toBe(true);
  });
});
