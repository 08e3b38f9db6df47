// The flags for sharing the machine: response cache, rate limiter, memory
// budget, on-demand mode.
import { describe, expect, it } from 'vitest';
import { parseEngineArgs } from '../../engine/server/cli-options.ts';

describe('sharing flags', () => {
  it("reads --cache-config in Triton's form", () => {
    expect(parseEngineArgs(['--model-repository=/m', '--cache-config=local,size=1024']).cacheConfig).toEqual({ kind: 'local', size: 1024 });
    expect(
      parseEngineArgs(['--model-repository=/m', '--cache-config', 'redis,host=h', '--cache-config', 'redis,port=7000']).cacheConfig,
    ).toMatchObject({
      kind: 'redis',
      host: 'h',
      port: 7000,
    });
    expect(parseEngineArgs(['--model-repository=/m']).cacheConfig).toBeUndefined();
    expect(() => parseEngineArgs(['--model-repository=/m', '--cache-config=local,size=x'])).toThrow(/size/);
  });

  it('reads --rate-limit and repeated --rate-limit-resource', () => {
    const o = parseEngineArgs([
      '--model-repository=/m',
      '--rate-limit=execution_count',
      '--rate-limit-resource=R1:10',
      '--rate-limit-resource',
      'R2:5:1',
    ]);
    expect(o.rateLimit).toBe('execution_count');
    expect(o.rateLimitResources).toEqual([
      { name: 'R1', count: 10, device: undefined },
      { name: 'R2', count: 5, device: 1 },
    ]);
    expect(parseEngineArgs(['--model-repository=/m']).rateLimit).toBe('off');
    expect(() => parseEngineArgs(['--model-repository=/m', '--rate-limit=sometimes'])).toThrow(/--rate-limit/);
  });

  it('reads the budget, pins and on-demand mode', () => {
    const o = parseEngineArgs([
      '--model-repository=/m',
      '--model-control-mode=on-demand',
      '--model-memory-budget=1048576',
      '--pin-model=a',
      '--pin-model',
      'b',
      '--load-model=a',
    ]);
    expect(o).toMatchObject({
      controlMode: 'on-demand',
      modelMemoryBudget: 1048576,
      pinnedModels: ['a', 'b'],
      loadModels: ['a'],
      onDemandTimeoutMs: 30_000,
    });
    expect(parseEngineArgs(['--model-repository=/m', '--model-memory-budget=50%']).modelMemoryBudget).toBeGreaterThan(0);
    expect(() => parseEngineArgs(['--model-repository=/m', '--model-memory-budget=much'])).toThrow(/--model-memory-budget/);
  });
});
