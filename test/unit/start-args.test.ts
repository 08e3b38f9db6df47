// `npm start` is safe on a shared host by default (issue 13, finding 9): the
// engine listens on loopback and takes shm keys under the gateway's prefix
// only; START_ENGINE_ARGS opens it up. Checked through the engine's own
// flag parser and shm manager.
import { describe, expect, it } from 'vitest';
import { parseEngineArgs } from '../../engine/server/cli-options.ts';
import { SharedMemoryManager } from '../../engine/shm/shared-memory-manager.ts';
import { startArgs } from '../../scripts/start-args.ts';
import { parseArgs as parseGatewayArgs } from '../../gateway/main.ts';
import { engineKeyMetadata } from '../../gateway/upstream/engine-key.ts';

/** The engine's own arguments: what follows its script (Node flags come before it). */
const afterScript = (engine: string[]) => engine.slice(engine.indexOf('engine/main.ts') + 1);
const engineOpts = (env: NodeJS.ProcessEnv) => parseEngineArgs(afterScript(startArgs(env).engine));

describe('npm start defaults', () => {
  it('engine on loopback, client shm only under the gateway prefix', () => {
    const o = engineOpts({});
    expect(o.host).toBe('127.0.0.1');
    expect(o.allowClientShm).toBe(true);
    expect(o.shmKeyPrefix).toBe('/tgw_');
    const m = new SharedMemoryManager({ keyPrefix: o.shmKeyPrefix });
    expect(() => m.register('x', '/some_other_object', 0, 8)).toThrow(/does not start with the allowed prefix '\/tgw_'/);
    expect(startArgs({}).gateway).toContain('--engine=127.0.0.1:8001');
  });

  it("follows the gateway's --prefix and the engine's --grpc-port", () => {
    const a = startArgs({ START_GATEWAY_ARGS: '--prefix=blue --port=9', START_ENGINE_ARGS: '--grpc-port=7001' });
    expect(parseEngineArgs(afterScript(a.engine)).shmKeyPrefix).toBe('/blue_');
    expect(a.gateway).toContain('--engine=127.0.0.1:7001');
  });

  it('with a socket path, the gateway reaches the engine over that Unix socket', () => {
    const a = startArgs({}, '/tmp/e.sock');
    expect(parseEngineArgs(afterScript(a.engine)).grpcUnixSocket).toBe('/tmp/e.sock');
    expect(a.gateway).toContain('--engine=unix:/tmp/e.sock');
  });

  it('with a local socket, the engine serves the local channel there and the gateway sends ModelInfer over it', () => {
    const a = startArgs({}, '/tmp/e.sock', 'k', '/tmp/e-local.sock');
    expect(parseEngineArgs(afterScript(a.engine)).localSocket).toBe('/tmp/e-local.sock');
    expect(parseGatewayArgs(a.gateway.slice(1), {}).transport?.engineLocalSocket).toBe('/tmp/e-local.sock');
    expect(parseEngineArgs(afterScript(startArgs({}).engine)).localSocket).toBeUndefined();
  });

  it('START_ENGINE_ARGS opens it up (documented in docs/reliability.md)', () => {
    const o = engineOpts({ START_ENGINE_ARGS: '--http-address=0.0.0.0 --shm-key-prefix=/' });
    expect(o.host).toBe('0.0.0.0');
    expect(o.shmKeyPrefix).toBe('/');
  });
});

describe('npm start keeps the admin APIs to the gateway', () => {
  it('restricts model-repository, trace, logging and shared-memory over HTTP and gRPC with a fresh key per start, off the command line', () => {
    const a = startArgs({});
    const b = startArgs({});
    const key = a.gatewayEnv.GATEWAY_ENGINE_KEY!.split('=')[1]!;
    expect(key).toMatch(/^[0-9a-f]{64}$/);
    expect(b.gatewayEnv.GATEWAY_ENGINE_KEY).not.toBe(a.gatewayEnv.GATEWAY_ENGINE_KEY);
    const o = parseEngineArgs(afterScript(a.engine), a.engineEnv);
    const groups = ['model-repository', 'trace', 'logging', 'shared-memory'];
    expect([...o.httpRestricted!.keys()].sort()).toEqual([...groups].sort());
    expect([...o.grpcRestricted!.keys()].sort()).toEqual([...groups].sort());
    for (const g of groups) {
      expect(o.httpRestricted!.get(g as 'trace')).toEqual({ header: 'admin-key', value: key });
      expect(o.grpcRestricted!.get(g as 'trace')).toEqual({ header: 'triton-grpc-protocol-admin-key', value: key });
    }
    expect([...a.engine, ...a.gateway].join(' ')).not.toContain(key);
    expect(engineKeyMetadata(a.gatewayEnv.GATEWAY_ENGINE_KEY)).toEqual({ 'triton-grpc-protocol-admin-key': key });
  });

  it('START_ADMIN_KEY picks the key; a bad GATEWAY_ENGINE_KEY is refused without echoing it', () => {
    expect(startArgs({ START_ADMIN_KEY: 'mine' }).gatewayEnv.GATEWAY_ENGINE_KEY).toBe('admin-key=mine');
    expect(engineKeyMetadata(undefined)).toBeUndefined();
    expect(engineKeyMetadata('a=1,B-c=x=y')).toEqual({ 'triton-grpc-protocol-a': '1', 'triton-grpc-protocol-b-c': 'x=y' });
    expect(() => engineKeyMetadata('s3cret')).toThrow(/^GATEWAY_ENGINE_KEY: expected/);
    expect(() => engineKeyMetadata('s3cret')).not.toThrow(/s3cret/);
  });
});

describe('memory release after very large requests', () => {
  it('runs full GCs after a large request, none after small ones', async () => {
    const { MemoryRelease } = await import('../../engine/sharing/memory-release.ts');
    const m = new MemoryRelease(10, 1000);
    m.note(999);
    await new Promise((r) => setTimeout(r, 50));
    expect(m.collections).toBe(0);
    m.note(1000);
    // Two passes 10 ms apart; a full GC takes long on a loaded machine, so wait for them, then check no third comes.
    for (const t0 = Date.now(); m.collections < 2 && Date.now() - t0 < 10_000; ) await new Promise((r) => setTimeout(r, 10));
    expect(m.collections).toBe(2);
    await new Promise((r) => setTimeout(r, 50));
    expect(m.collections).toBe(2);
    m.stop();
  });
});
