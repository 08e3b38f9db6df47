// Gateway hardening (issue 13), pure parts: deep JSON is a 400 (no stack
// overflow), callback allowlists take only http(s), and the inline retry of a
// staged call is decided by error kind and the engine's region list.
import { describe, expect, it } from 'vitest';
import { GatewayError, gatewayError } from '../../gateway/core/errors.ts';
import { implicitDefinition, type ResolvedFunction } from '../../gateway/calls/function-registry.ts';
import { FunctionDefinitionSchema } from '../../gateway/calls/function-schema.ts';
import { mayBeRegionLost, retryInline } from '../../gateway/calls/invoke.ts';
import { MemoryLeaseStore } from '../../gateway/staging/memory-lease-store.ts';
import { Reaper } from '../../gateway/staging/reaper.ts';
import { regionName } from '../../gateway/staging/region-lease.ts';
import { jsonBodyInputs, multipartInputs, nestedDeeperThan } from '../../gateway/calls/payload-codec.ts';
import { checkCallbackUrl, matchesPrefix } from '../../gateway/webhooks/callback-allow.ts';

function fn(): ResolvedFunction {
  return {
    name: 'f',
    model: 'm',
    version: '',
    platform: 'p',
    implicit: true,
    definition: implicitDefinition('f'),
    inputs: [{ name: 'x', tensor: 'X', datatype: 'FP32', shape: [-1] }],
    outputs: [],
  };
}

function caught(f: () => unknown): unknown {
  try {
    f();
  } catch (e) {
    return e;
  }
  return undefined;
}

const deep = (d: number, leaf = '1') => `${'['.repeat(d)}${leaf}${']'.repeat(d)}`;

describe('deep JSON', () => {
  it('a value nested 20,000 deep is BODY_INVALID or INPUT_INVALID, never a stack overflow', () => {
    for (const body of [
      `{"inputs":{"x":${deep(20_000)}}}`,
      `{"inputs":{"x":{"data":${deep(20_000)}}}}`,
      `{"inputs":{"x":${deep(20_000, '{}')}}}`,
      `{"inputs":{"x":1},"extra":${deep(20_000)}}`,
    ]) {
      const e = caught(() => jsonBodyInputs(fn(), Buffer.from(body)));
      expect(e, body.slice(0, 40)).toBeInstanceOf(GatewayError);
      expect((e as GatewayError).status).toBe(400);
      expect((e as Error).message).toMatch(/nested deeper than|invalid/);
    }
  });

  it('a multipart text field nested 20,000 deep (arrays or {data:{data:...}}) is INPUT_INVALID', async () => {
    for (const text of [deep(20_000), `${'{"data":'.repeat(20_000)}1${'}'.repeat(20_000)}`]) {
      const form = new FormData();
      form.set('x', text);
      const e = await multipartInputs(fn(), form).then(
        () => undefined,
        (x: unknown) => x,
      );
      expect(e).toBeInstanceOf(GatewayError);
      expect((e as GatewayError).status).toBe(400);
    }
  });

  it('ordinary nesting still works and nestedDeeperThan is exact', () => {
    expect(jsonBodyInputs(fn(), Buffer.from(`{"inputs":{"x":${deep(3)}}}`)).inputs[0]!.shape).toEqual([1]);
    expect(nestedDeeperThan(JSON.parse(deep(5)), 5)).toBe(false);
    expect(nestedDeeperThan(JSON.parse(deep(6)), 5)).toBe(true);
  });
});

describe('callback allowlist', () => {
  const def = (callbackAllow: string[]) =>
    FunctionDefinitionSchema.safeParse({ name: 'f', target: { model: 'm' }, async: { callbackAllow } });

  it('refuses javascript:, file: and data: entries; takes http and https', () => {
    expect(def(['javascript:alert(1)']).success).toBe(false);
    expect(def(['file:///etc/passwd']).success).toBe(false);
    expect(def(['data:text/plain,x']).success).toBe(false);
    expect(def(['https://hooks.example.com/cb', 'http://10.0.0.1:8080/']).success).toBe(true);
  });

  it('a non-http entry in GATEWAY_CALLBACK_ALLOW matches nothing', () => {
    expect(matchesPrefix(new URL('https://x.example/'), 'javascript:alert(1)')).toBe(false);
    expect('reason' in checkCallbackUrl('javascript:alert(1)', [], { GATEWAY_CALLBACK_ALLOW: 'javascript:' })).toBe(true);
  });
});

describe('inline retry of a staged call', () => {
  it('only engine rejections (INVALID_ARGUMENT / NOT_FOUND kinds) may be a lost region', () => {
    expect(mayBeRegionLost(gatewayError('ENGINE_REJECTED', { name: 'f', reason: 'x' }))).toBe(true);
    expect(mayBeRegionLost(gatewayError('FUNCTION_UNAVAILABLE', { name: 'f', model: 'm' }))).toBe(true);
    for (const e of [
      gatewayError('ENGINE_ERROR', { name: 'f' }),
      gatewayError('ENGINE_TIMEOUT', { name: 'f', timeoutMs: 1 }),
      gatewayError('ENGINE_UNAVAILABLE', { address: 'a' }),
      new Error('Unable to find shared memory region'),
    ])
      expect(mayBeRegionLost(e)).toBe(false);
  });

  it('retries only when a region this call used was missing on the engine', () => {
    expect(retryInline(['r0', undefined], ['r0'])).toBe(true);
    expect(retryInline(['r0'], ['r1'])).toBe(false);
    expect(retryInline([undefined], ['r1'])).toBe(false);
    expect(retryInline(['r0'], [])).toBe(false);
  });
});

describe('slow-client timeout flags', () => {
  it('parse into GatewayOptions.timeouts; the 408 reply carries the catalog body', async () => {
    const { parseArgs } = await import('../../gateway/main.ts');
    const { requestTimeoutReply, timeoutServerOptions } = await import('../../gateway/http/http-timeouts.ts');
    const o = parseArgs(['--header-timeout-ms=500', '--body-timeout-ms=2000', '--idle-timeout-ms=100']);
    expect(o.timeouts).toEqual({ headersMs: 500, bodyMs: 2000, idleMs: 100 });
    const so = timeoutServerOptions({ headersMs: 500, bodyMs: 2000, idleMs: 100 });
    expect(so).toMatchObject({ headersTimeout: 500, requestTimeout: 2500, keepAliveTimeout: 100 });
    const reply = requestTimeoutReply({ headersMs: 500, bodyMs: 2000, idleMs: 100 });
    expect(reply).toMatch(/^HTTP\/1.1 408 /);
    const body = reply.slice(reply.indexOf('\r\n\r\n') + 4);
    expect(JSON.parse(body).error.code).toBe('REQUEST_TIMEOUT');
    expect(reply).toContain(`Content-Length: ${Buffer.byteLength(body)}`);
  });
});

describe('route flags', () => {
  it('--direct-route and --http1-front (a flag name with a digit) parse', async () => {
    const { parseArgs } = await import('../../gateway/main.ts');
    expect(parseArgs(['--http1-front=false', '--direct-route=false'], {})).toMatchObject({
      transport: { http1Front: false, directRoute: false },
    });
    expect(parseArgs(['--http1-front'], {})).toMatchObject({ transport: { http1Front: true } });
  });
});

describe('orphan sweep at start', () => {
  it('regions of an earlier gateway that had our pid (a container restart) are swept; ours and live ones stay', async () => {
    const keys = new Set([
      `/${regionName('tgw', '1xdead0001', 0)}`,
      `/${regionName('tgw', '1xbeef0002', 0)}`,
      `/${regionName('tgw', '77x0000aaaa', 0)}`,
    ]);
    const engine = {
      async unregisterRegion() {},
      async regionStatus() {
        return {};
      },
    };
    const host = {
      unlinkIfExists: (k: string) => keys.delete(k),
      listKeys: (p: string) => [...keys].filter((k) => k.startsWith(p)),
      isProcessAlive: () => true,
      ownPid: 1,
    };
    const reaper = new Reaper(new MemoryLeaseStore(), engine as never, host, { ownerId: '1xbeef0002', prefix: 'tgw', leaseTtlMs: 500 });
    expect(await reaper.sweep()).toEqual([regionName('tgw', '1xdead0001', 0)]);
    expect([...keys].sort()).toEqual([`/${regionName('tgw', '1xbeef0002', 0)}`, `/${regionName('tgw', '77x0000aaaa', 0)}`].sort());
  });
});
