import { describe, expect, it } from 'vitest';
import { DEFAULT_REDIS_TTL_MS, LocalResponseCache, parseCacheConfig } from '../../engine/sharing/response-cache.ts';
import { cacheIdentity, type IdentifiedVersion } from '../../engine/sharing/cache-identity.ts';
import { cacheKey, decodeTensors, encodeTensors } from '../../engine/sharing/response-cache-codec.ts';
import { modelCacheable, requestCacheable } from '../../engine/sharing/cache-manager.ts';
import type { InferRequest } from '../../engine/api/infer-request.ts';
import type { ModelConfig } from '../../engine/api/model-config.ts';

const bytes = (n: number, fill = 1) => new Uint8Array(n).fill(fill);
const req = (data: number[], parameters: InferRequest['parameters'] = {}): InferRequest => ({
  modelName: 'm',
  inputs: [{ name: 'X', datatype: 'FP32', shape: [data.length], data: new Uint8Array(Float32Array.from(data).buffer) }],
  outputs: [],
  parameters,
});

describe('LocalResponseCache', () => {
  it('keeps total bytes within its size, evicting least recently used first', async () => {
    const c = new LocalResponseCache(300);
    await c.set('a', bytes(99)); // cost 100
    await c.set('b', bytes(99));
    await c.set('c', bytes(99));
    expect(c.stats().bytes).toBe(300);
    await c.get('a'); // a is now most recent; b is the LRU
    await c.set('d', bytes(99));
    expect(c.stats().bytes).toBeLessThanOrEqual(300);
    expect(await c.get('b')).toBeUndefined();
    expect(await c.get('a')).toBeDefined();
    expect(await c.get('d')).toBeDefined();
    expect(c.stats().evictions).toBe(1);
  });

  it('does not keep an entry larger than the whole cache', async () => {
    const c = new LocalResponseCache(100);
    await c.set('a', bytes(50));
    await c.set('big', bytes(200));
    expect(await c.get('big')).toBeUndefined();
    expect(await c.get('a')).toBeDefined();
    expect(c.stats()).toMatchObject({ hits: 1, misses: 1, lookups: 2 });
  });

  it('discard drops the entry and counts its lookup as a miss', async () => {
    const c = new LocalResponseCache(1000);
    await c.set('a', bytes(9));
    expect(await c.get('a')).toBeDefined();
    await c.discard('a');
    expect(c.stats()).toMatchObject({ entries: 0, bytes: 0, hits: 0, misses: 1, lookups: 1 });
  });
});

describe('parseCacheConfig', () => {
  it("reads Triton's local and redis forms, merging repeated values", () => {
    expect(parseCacheConfig([])).toBeUndefined();
    expect(parseCacheConfig(['local,size=1048576'])).toEqual({ kind: 'local', size: 1048576 });
    expect(parseCacheConfig(['redis,host=10.0.0.1', 'redis,port=6380'])).toMatchObject({
      kind: 'redis',
      host: '10.0.0.1',
      port: 6380,
      ttlMs: DEFAULT_REDIS_TTL_MS,
    });
    expect(parseCacheConfig(['redis,ttl_ms=5000'])).toMatchObject({ ttlMs: 5000 });
    expect(parseCacheConfig(['redis,ttl_ms=0'])).toMatchObject({ ttlMs: 0 });
    expect(() => parseCacheConfig(['redis,ttl_ms=-1'])).toThrow(/ttl_ms must be a non-negative integer/);
    expect(() => parseCacheConfig(['local'])).toThrow(/size/);
    expect(() => parseCacheConfig(['memcached,size=1'])).toThrow(/unknown cache/);
    expect(() => parseCacheConfig(['local,size=1', 'redis,port=1'])).toThrow(/one cache/);
  });
});

describe('cache key and codec', () => {
  it('hashes model, version, input bytes and requested outputs', () => {
    const k = cacheKey('m', 1, 'id', req([1, 2]), ['Y', 'Z']);
    expect(cacheKey('m', 1, 'id', req([1, 2]), ['Z', 'Y'])).toBe(k);
    expect(cacheKey('m', 2, 'id', req([1, 2]), ['Y', 'Z'])).not.toBe(k);
    expect(cacheKey('n', 1, 'id', req([1, 2]), ['Y', 'Z'])).not.toBe(k);
    expect(cacheKey('m', 1, 'id', req([1, 3]), ['Y', 'Z'])).not.toBe(k);
    expect(cacheKey('m', 1, 'id', req([1, 2]), ['Y'])).not.toBe(k);
  });

  it("hashes the version's identity and the parameters a model reads, not the scheduling ones", () => {
    const k = cacheKey('m', 1, 'id', req([1, 2]), ['Y']);
    expect(cacheKey('m', 1, 'other', req([1, 2]), ['Y'])).not.toBe(k);
    expect(cacheKey('m', 1, 'id', req([1, 2], { scale: 2 }), ['Y'])).not.toBe(k);
    expect(cacheKey('m', 1, 'id', req([1, 2], { scale: 2 }), ['Y'])).not.toBe(cacheKey('m', 1, 'id', req([1, 2], { scale: '2' }), ['Y']));
    expect(cacheKey('m', 1, 'id', req([1, 2], { a: 1, b: 2 }), ['Y'])).toBe(cacheKey('m', 1, 'id', req([1, 2], { b: 2, a: 1 }), ['Y']));
    expect(cacheKey('m', 1, 'id', req([1, 2], { priority: 1, timeout: 5000, binary_data_output: true }), ['Y'])).toBe(k);
  });

  it("an ensemble's identity changes with the version each step runs on", () => {
    const step = (identity: string): IdentifiedVersion => ({
      name: 's',
      version: 1,
      identity,
      config: { name: 's', max_batch_size: 0, input: [], output: [] },
    });
    const ens: IdentifiedVersion = {
      name: 'e',
      version: 1,
      identity: 'e1',
      config: {
        name: 'e',
        platform: 'ensemble',
        max_batch_size: 0,
        input: [],
        output: [],
        ensemble_scheduling: { step: [{ model_name: 's', model_version: -1, input_map: {}, output_map: {} }] },
      },
    };
    const a = cacheIdentity(ens, () => step('s1'));
    expect(cacheIdentity(ens, () => step('s1'))).toBe(a);
    expect(cacheIdentity(ens, () => step('s2'))).not.toBe(a);
    expect(cacheIdentity(ens, () => undefined)).not.toBe(a);
    // A version without a fingerprint is unique to itself.
    const bare = { name: 'm', version: 1, config: step('x').config };
    expect(cacheIdentity(bare, () => undefined)).toBe(cacheIdentity(bare, () => undefined));
    expect(cacheIdentity({ ...bare }, () => undefined)).not.toBe(cacheIdentity(bare, () => undefined));
  });

  it('round-trips tensors exactly and rejects truncated entries', () => {
    const t = [
      { name: 'A', datatype: 'FP32' as const, shape: [2], data: new Uint8Array(Float32Array.from([1.5, -2]).buffer) },
      { name: 'B', datatype: 'BYTES' as const, shape: [0], data: new Uint8Array(0) },
    ];
    const enc = encodeTensors(t);
    expect(decodeTensors(enc)).toEqual(t);
    expect(decodeTensors(enc.subarray(0, enc.byteLength - 1))).toBeUndefined();
  });
});

describe('what is cached', () => {
  const cfg = (extra: Partial<ModelConfig>): ModelConfig => ({ name: 'm', max_batch_size: 0, input: [], output: [], ...extra });
  const none = () => undefined;
  it('needs response_cache.enable and a stateless model', () => {
    expect(modelCacheable(cfg({}), none)).toBe(false);
    expect(modelCacheable(cfg({ response_cache: { enable: true } }), none)).toBe(true);
    expect(modelCacheable(cfg({ response_cache: { enable: true }, model_transaction_policy: { decoupled: true } }), none)).toBe(false);
    expect(modelCacheable(cfg({ response_cache: { enable: true }, sequence_batching: {} }), none)).toBe(false);
  });
  it('caches a whole ensemble only when every step is stateless', () => {
    const steps = { step: [{ model_name: 'a', model_version: -1, input_map: {}, output_map: {} }] };
    const ens = cfg({ platform: 'ensemble', response_cache: { enable: true }, ensemble_scheduling: steps });
    expect(modelCacheable(ens, () => cfg({}))).toBe(true);
    expect(modelCacheable(ens, () => cfg({ sequence_batching: {} }))).toBe(false);
  });
  it('skips requests with outputs into shared memory', () => {
    expect(requestCacheable(req([1]))).toBe(true);
    expect(requestCacheable({ ...req([1]), outputs: [{ name: 'Y', shm: { region: 'r', offset: 0, byteSize: 4 } }] })).toBe(false);
  });
});
