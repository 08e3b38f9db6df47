// exact-json.ts: integers past 2^53 kept as bigint, everything else exactly
// what JSON.parse gives (checked on generated documents), errors as SyntaxError.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH, mayHaveLostIntegers, parseExactJson } from '../../engine/frontends/http/exact-json.ts';

describe('parseExactJson', () => {
  it('keeps integer literals past 2^53 exact, safe ones as numbers', () => {
    expect(parseExactJson('[4611686018427387905,-9223372036854775808,18446744073709551615,9007199254740991,1]')).toEqual([
      4611686018427387905n,
      -9223372036854775808n,
      18446744073709551615n,
      9007199254740991,
      1,
    ]);
    expect(parseExactJson('{"a":{"b":[12345678901234567890.5, 1e400, 0.12345678901234567890]}}')).toEqual({
      a: { b: [12345678901234567890.5, Infinity, 0.1234567890123456789] },
    });
  });

  it('matches JSON.parse on any JSON document with a long integer in it', () => {
    // A generated double such as 1.2e20 is written as an integer literal: ours reads it as bigint, so compare as numbers.
    const asNumbers = (v: unknown): unknown =>
      typeof v === 'bigint'
        ? Number(v)
        : Array.isArray(v)
          ? v.map(asNumbers)
          : v && typeof v === 'object'
            ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, asNumbers(x)]))
            : v;
    const doc = fc.jsonValue().map((v) => `[${JSON.stringify(v)},12345678901234567,${JSON.stringify('x\u00e9\\"\n')}]`);
    fc.assert(
      fc.property(doc, (text) => {
        const ours = parseExactJson(text) as unknown[];
        const theirs = JSON.parse(text) as unknown[];
        expect(ours[1]).toBe(12345678901234567n);
        expect(asNumbers([ours[0], ours[2]])).toEqual([theirs[0], theirs[2]]);
      }),
      { numRuns: 300 },
    );
  });

  it('refuses what JSON.parse refuses, and nesting past the limit, with a SyntaxError', () => {
    for (const bad of [
      '[12345678901234567,]',
      '{"a" 12345678901234567}',
      '[12345678901234567',
      '"\u0001" 12345678901234567',
      '[01, 12345678901234567]',
      '[12345678901234567] x',
    ]) {
      expect(() => parseExactJson(bad), bad).toThrow(SyntaxError);
    }
    const deep = '['.repeat(MAX_JSON_DEPTH + 1) + '12345678901234567' + ']'.repeat(MAX_JSON_DEPTH + 1);
    expect(() => parseExactJson(deep)).toThrow(/nested deeper/);
  });

  it('mayHaveLostIntegers: only numbers past 2^53, in nested arrays too', () => {
    expect(mayHaveLostIntegers(JSON.parse('[[1,2],[3,4611686018427387905]]'))).toBe(true);
    expect(mayHaveLostIntegers(JSON.parse('-9223372036854775808'))).toBe(true);
    expect(mayHaveLostIntegers(JSON.parse('[9007199254740991, -9007199254740991, 0.12345678901234567, 1e-300]'))).toBe(false);
    expect(mayHaveLostIntegers('12345678901234567890')).toBe(false);
  });

  it('keeps "__proto__" as a data key, as JSON.parse does', () => {
    const o = parseExactJson('{"__proto__":{"x":1},"n":12345678901234567}') as Record<string, unknown>;
    expect(Object.getPrototypeOf(o)).toBe(Object.prototype);
    expect(Object.keys(o)).toEqual(['__proto__', 'n']);
  });
});
