// gateway/calls/api-key.ts: keys by digest, accepted keys' digests kept by key, and a
// key rotated out of the environment refused on the next call even though its
// digest is still kept.
import { describe, expect, it } from 'vitest';
import { checkApiKey, keyAccepted } from '../../gateway/calls/api-key.ts';
import type { FunctionDefinition } from '../../gateway/calls/function-schema.ts';

const def = { name: 'f', auth: { apiKeyEnv: ['K_A', 'K_B'] } } as unknown as FunctionDefinition;

describe('keyAccepted', () => {
  it('accepts a listed key from either variable, refuses others and near misses', () => {
    const env = { K_A: 'one, two', K_B: 'three' };
    expect(keyAccepted(def, 'one', env)).toBe(true);
    expect(keyAccepted(def, 'three', env)).toBe(true);
    expect(keyAccepted(def, 'thre', env)).toBe(false);
    expect(keyAccepted(def, 'one ', env)).toBe(false);
  });

  it('a key accepted before (its digest kept) is refused once rotated out, and accepted again when back', () => {
    const env: Record<string, string> = { K_A: 'rot-1', K_B: '' };
    for (let i = 0; i < 3; i++) expect(keyAccepted(def, 'rot-1', env)).toBe(true);
    env.K_A = 'rot-2';
    expect(keyAccepted(def, 'rot-1', env)).toBe(false);
    expect(keyAccepted(def, 'rot-2', env)).toBe(true);
    env.K_A = 'rot-1,rot-2';
    expect(keyAccepted(def, 'rot-1', env)).toBe(true);
  });

  it('many accepted keys (past the kept 256) all still check right', () => {
    const keys = Array.from({ length: 600 }, (_, i) => `key-${i}`);
    const env = { K_A: keys.join(','), K_B: '' };
    for (const k of keys) expect(keyAccepted(def, k, env)).toBe(true);
    for (const k of keys.slice(0, 10)) expect(keyAccepted(def, `${k}x`, env)).toBe(false);
  });

  it('checkApiKey: 401 without a key, 403 with a wrong one, Bearer accepted', () => {
    const env = { K_A: 'one', K_B: '' };
    const h = (m: Record<string, string>) => (n: string) => m[n];
    expect(() => checkApiKey(def, h({}), env)).toThrow(expect.objectContaining({ status: 401 }));
    expect(() => checkApiKey(def, h({ 'x-api-key': 'two' }), env)).toThrow(expect.objectContaining({ status: 403 }));
    expect(() => checkApiKey(def, h({ authorization: 'Bearer one' }), env)).not.toThrow();
  });
});
