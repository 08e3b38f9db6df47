// The flags for sharing the machine: response cache, rate limiter, memory
// budget, on-demand mode.
import { describe, expect, it } from 'vitest';
import { parseEngineArgs } from '../../engine/cli-options.ts';

describe('sharing flags', () => {
  it("reads --cache-config in Triton's form", () => {
    expect(parseEngineArgs(['--model-repository=/m', '--cache-config=local,size=1024']).cacheConfig).toEqual({ kind: 'local', size: 1024 });
    expect(parseEngineArgs(['--model-repository=/m', '--cache-config', 'redis,host=h', '--cache-config', 'redis,port=7000']).cacheConfig).toMatchObject({
      kind: 'redis', host: 'h', port: 7000,
    });
    expect(parseEngineArgs(['--model-repository=/m']).cacheConfig).toBeUndefined();
    expect(() => parseEngineArgs(['--model-repository=/m', '--cache-config=local,size=x'])).toThrow(/size/);
  });
});
