// restricted-api.ts: Triton's option syntax and parse errors, the group of
// every HTTP path and every RPC of the service, the header check, and the
// environment variable that keeps a key off the command line.
import { describe, expect, it } from 'vitest';
import {
  failedRestriction,
  GRPC_RPC_GROUPS,
  httpApiGroup,
  parseRestrictedFeatures,
  restrictedOption,
  RESTRICTED_GROUPS,
} from '../../engine/frontends/restricted-api.ts';
import { healthService, inferenceService } from '../../protocol/index.ts';
import { parseEngineArgs } from '../../engine/server/cli-options.ts';

describe('parseRestrictedFeatures', () => {
  it('reads groups, key and value; a value may hold ":" and "="', () => {
    const m = parseRestrictedFeatures(['model-repository,trace:admin-key=a:b=c', 'health:k=v'], 'http-restricted-api');
    expect(Object.fromEntries(m)).toEqual({
      'model-repository': { header: 'admin-key', value: 'a:b=c' },
      trace: { header: 'admin-key', value: 'a:b=c' },
      health: { header: 'k', value: 'v' },
    });
    const g = parseRestrictedFeatures(['inference:infer-key=x'], 'grpc-restricted-protocol');
    expect(g.get('inference')).toEqual({ header: 'triton-grpc-protocol-infer-key', value: 'x' });
  });

  it("refuses as Triton's parser does: format, unknown group, a group in two values", () => {
    expect(() => parseRestrictedFeatures(['health'], 'http-restricted-api')).toThrow(
      "--http-restricted-api option format is '<config name>:<setting>=<value>'. Got health",
    );
    expect(() => parseRestrictedFeatures(['health:k='], 'http-restricted-api')).toThrow('option format');
    expect(() => parseRestrictedFeatures([':k=v'], 'grpc-restricted-protocol')).toThrow('--grpc-restricted-protocol option format');
    expect(() => parseRestrictedFeatures(['healthz:k=v'], 'http-restricted-api')).toThrow("unknown restricted api 'healthz'");
    expect(() => parseRestrictedFeatures(['healthz:k=v'], 'grpc-restricted-protocol')).toThrow("unknown restricted protocol 'healthz'");
    expect(() => parseRestrictedFeatures(['health:a=1', 'trace,health:b=2'], 'http-restricted-api')).toThrow(
      "restricted api 'health' can not be specified in multiple config groups",
    );
    expect(() => parseRestrictedFeatures(['health:bad key=1'], 'http-restricted-api')).toThrow("'bad key' is not a valid header name");
  });

  it('takes one more value from the environment; a flag naming the same group wins; a bad value never echoes the secret', () => {
    const env = { ENGINE_HTTP_RESTRICTED_API: 'trace,logging:admin-key=from-env' };
    const m = restrictedOption(['logging:other=flag'], env, 'http-restricted-api');
    expect(m.get('trace')).toEqual({ header: 'admin-key', value: 'from-env' });
    expect(m.get('logging')).toEqual({ header: 'other', value: 'flag' });
    let msg = '';
    try {
      restrictedOption([], { ENGINE_GRPC_RESTRICTED_PROTOCOL: 'no-group-here=s3cret-value' }, 'grpc-restricted-protocol');
    } catch (e) {
      msg = (e as Error).message;
    }
    expect(msg).toMatch(/^ENGINE_GRPC_RESTRICTED_PROTOCOL: expected/);
    expect(msg).not.toContain('s3cret');
    const o = parseEngineArgs(['--model-repository=/m', '--grpc-restricted-protocol=shared-memory:k=v'], {
      ENGINE_GRPC_RESTRICTED_PROTOCOL: 'trace:k=w',
    });
    expect(Object.fromEntries(o.grpcRestricted!)).toEqual({
      'shared-memory': { header: 'triton-grpc-protocol-k', value: 'v' },
      trace: { header: 'triton-grpc-protocol-k', value: 'w' },
    });
  });
});

describe('groups', () => {
  it("every HTTP endpoint in its Triton group (after http_server.cc's Handle)", () => {
    const table: Array<[string, string | undefined]> = [
      ['/v2', 'metadata'],
      ['/v2/', 'metadata'],
      ['/v2/health/live', 'health'],
      ['/v2/health/ready', 'health'],
      ['/v2/models/m', 'metadata'],
      ['/v2/models/m/versions/2', 'metadata'],
      ['/v2/models/m/ready', 'health'],
      ['/v2/models/m/versions/1/ready', 'health'],
      ['/v2/models/m/infer', 'inference'],
      ['/v2/models/m/versions/1/infer', 'inference'],
      ['/v2/models/m/generate', 'inference'],
      ['/v2/models/m/generate_stream', 'inference'],
      ['/v2/models/m/config', 'model-config'],
      ['/v2/models/stats', 'statistics'],
      ['/v2/models/m/stats', 'statistics'],
      ['/v2/models/m/versions/3/stats', 'statistics'],
      ['/v2/models/m/trace/setting', 'trace'],
      ['/v2/trace/setting', 'trace'],
      ['/v2/logging', 'logging'],
      ['/v2/repository/index', 'model-repository'],
      ['/v2/repository/models/m/load', 'model-repository'],
      ['/v2/systemsharedmemory/status', 'shared-memory'],
      ['/v2/systemsharedmemory/region/r/register', 'shared-memory'],
      ['/v2/cudasharedmemory/region/r/unregister', 'shared-memory'],
      ['//v2//logging/', 'logging'],
      ['/metrics', undefined],
      ['/v3/logging', undefined],
      ['/v2/unknown', undefined],
      ['/v2/models/m/nonsense', undefined],
    ];
    for (const [p, g] of table) expect(httpApiGroup(p), p).toBe(g);
  });

  it('every RPC of GRPCInferenceService and the health service has a group', () => {
    const rpcs = [...Object.keys(inferenceService()), ...Object.keys(healthService()).filter((k) => k === 'Check')];
    for (const r of rpcs) expect(RESTRICTED_GROUPS, r).toContain(GRPC_RPC_GROUPS[r]);
    expect(Object.keys(GRPC_RPC_GROUPS).sort()).toEqual(rpcs.sort());
  });
});

describe('failedRestriction', () => {
  const f = parseRestrictedFeatures(['trace:Admin-Key=v'], 'http-restricted-api');
  it('open groups and right values pass; header names match in any case; a missing or wrong value fails', () => {
    expect(failedRestriction(f, 'health', () => undefined)).toBeUndefined();
    expect(failedRestriction(f, undefined, () => undefined)).toBeUndefined();
    expect(failedRestriction(f, 'trace', (h) => (h === 'admin-key' ? 'v' : undefined))).toBeUndefined();
    expect(failedRestriction(f, 'trace', () => undefined)?.header).toBe('Admin-Key');
    expect(failedRestriction(f, 'trace', () => 'V')?.header).toBe('Admin-Key');
    expect(failedRestriction(f, 'trace', () => 'v ')?.header).toBe('Admin-Key');
  });
});
