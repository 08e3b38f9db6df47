// The python backend's stub_memory_limit parameter and its default from the
// memory budget (engine/backends/python/stub-memory-limit.ts, issue 41).
import { describe, expect, it } from 'vitest';
import { mibApart, overMemoryError, parseBytes, stubMemoryLimitBytes } from '../../engine/backends/python/stub-memory-limit.ts';
import type { ModelConfig } from '../../engine/api/model-config.ts';

const cfg = (value?: string) =>
  ({ name: 'm', ...(value === undefined ? {} : { parameters: { stub_memory_limit: { string_value: value } } }) }) as unknown as ModelConfig;

describe('stub_memory_limit', () => {
  it('reads sizes with binary and decimal units', () => {
    expect(parseBytes('512MiB')).toBe(512 * 2 ** 20);
    expect(parseBytes('1.5 GB')).toBe(1.5e9);
    expect(parseBytes('1048576')).toBe(2 ** 20);
    expect(parseBytes('2gib')).toBe(2 * 2 ** 30);
    expect(parseBytes('lots')).toBeUndefined();
    expect(parseBytes('-5MiB')).toBeUndefined();
    expect(parseBytes('0')).toBeUndefined();
  });
  it('the parameter wins; below 16MiB or malformed fails naming it', () => {
    expect(stubMemoryLimitBytes(cfg('256MiB'), 2 ** 32, 2)).toBe(256 * 2 ** 20);
    expect(() => stubMemoryLimitBytes(cfg('1MiB'), undefined, 1)).toThrow(/parameter stub_memory_limit must be a size of at least 16MiB/);
    expect(() => stubMemoryLimitBytes(cfg('x'), undefined, 1)).toThrow(/got 'x'/);
  });
  it('without it: twice the budget shared by the model stubs, or no limit without a budget', () => {
    expect(stubMemoryLimitBytes(cfg(), 2 ** 30, 4)).toBe(2 ** 29);
    expect(stubMemoryLimitBytes(cfg(), undefined, 4)).toBeUndefined();
    expect(stubMemoryLimitBytes(cfg(''), 2 ** 30, 1)).toBe(2 ** 31);
  });
  it('the over-limit error shows usage and limit apart, however close (never "256 MiB, over ... 256 MiB")', () => {
    const MiB = 2 ** 20;
    expect(mibApart(300 * MiB, 256 * MiB)).toEqual(['300 MiB', '256 MiB']);
    expect(mibApart(256.4 * MiB, 256 * MiB)).toEqual(['256.4 MiB', '256.0 MiB']);
    expect(mibApart(256 * MiB + 4096, 256 * MiB)).toEqual(['256.004 MiB', '256.000 MiB']);
    expect(overMemoryError('m', 'm_0_0', 256 * MiB, 256.4 * MiB).message).toContain(
      'its stub used 256.4 MiB, over its stub_memory_limit of 256.0 MiB',
    );
  });
});
