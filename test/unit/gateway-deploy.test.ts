import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseDeployArgs, readBundle, runDeploy } from '../../gateway/deploy/deploy-cli.ts';
import { BundleVersionConflict, MemoryBundleStore, type BundleStore } from '../../gateway/deploy/bundle-store.ts';
import { BundleRefused, FunctionDeployer, contentVersion } from '../../gateway/deploy/function-deployer.ts';
import { RedisBundleStore } from '../../gateway/deploy/redis-bundle-store.ts';
import type { FunctionDefinition } from '../../gateway/calls/function-schema.ts';
import { Redis } from 'ioredis';
import { TestRedis, waitFor } from '../integration/L0_gateway-support.ts';

const fn = (name: string, model = 'm1', extra: object = {}) => ({ name, target: { model }, ...extra });

/** A registry stand-in that records swaps. */
class FakeRegistry {
  defs: FunctionDefinition[] = [];
  version = '';
  swaps = 0;
  replace(d: FunctionDefinition[], v: string) {
    this.defs = d;
    this.version = v;
    this.swaps++;
  }
}

// The engine as checkTarget sees it: models m1 (input x) and m2 (input y).
const MODELS: Record<string, string[]> = { m1: ['x'], m2: ['y'] };
async function checkTarget(d: FunctionDefinition): Promise<string[]> {
  const ins = MODELS[d.target.model];
  if (!ins) return [`target model '${d.target.model}' does not exist`];
  return Object.entries(d.inputs ?? {})
    .filter(([, t]) => !ins.includes(t))
    .map(([p, t]) => `input '${p}' maps to '${t}', which model '${d.target.model}' does not have`);
}

function deployer(store: BundleStore = new MemoryBundleStore()) {
  const registry = new FakeRegistry();
  return { registry, store, d: new FunctionDeployer({ store, registry, checkTarget }) };
}

describe('function deployer', () => {
  it('refuses an invalid bundle whole, listing every error, and changes nothing', async () => {
    const { d, registry, store } = deployer();
    await d.start([fn('a') as FunctionDefinition], 'v1');
    const before = { defs: registry.defs, swaps: registry.swaps };
    const bad = { version: 'v2', functions: [fn('a'), fn('b', 'nope'), fn('c', 'm2', { inputs: { i: 'zz' } }), fn('ok', 'm1')] };
    const err = await d.deploy(bad).catch((e) => e);
    expect(err).toBeInstanceOf(BundleRefused);
    expect(err.errors).toEqual([
      "functions.1 (b): target model 'nope' does not exist",
      "functions.2 (c): input 'i' maps to 'zz', which model 'm2' does not have",
    ]);
    const zodErr = await d.deploy({ version: 'v3', functions: [fn('a'), fn('a'), { name: 'x y', target: {} }] }).catch((e) => e);
    expect(zodErr).toBeInstanceOf(BundleRefused);
    expect(zodErr.errors.join('\n')).toMatch(/functions\.1\.name: duplicate function 'a'/);
    expect(zodErr.errors.join('\n')).toMatch(/functions\.2\.name/);
    expect(zodErr.errors.join('\n')).toMatch(/functions\.2\.target\.model/);
    expect(registry).toMatchObject({ defs: before.defs, swaps: before.swaps, version: 'v1' });
    expect(await store.history()).toEqual(['v1']);
  });

  it('deploys atomically with immutable snapshots, rolls back, refuses reused versions', async () => {
    const { d, registry, store } = deployer();
    await d.start([fn('a') as FunctionDefinition], 'v1');
    const snapshot = registry.defs;
    const v2 = await d.deploy({ version: 'v2', functions: [fn('a', 'm2'), fn('b')] });
    expect(v2.version).toBe('v2');
    expect(registry.defs.map((x) => `${x.name}:${x.target.model}`)).toEqual(['a:m2', 'b:m1']);
    expect(registry.defs[0]!.limits.timeoutMs).toBe(30_000); // defaults filled
    expect(Object.isFrozen(registry.defs[0]!.target)).toBe(true);
    expect(snapshot[0]!.target.model).toBe('m1'); // the old snapshot is untouched
    expect(() => ((registry.defs[0]!.target as { model: string }).model = 'x')).toThrow();
    await expect(d.deploy({ version: 'v2', functions: [fn('z')] })).rejects.toBeInstanceOf(BundleVersionConflict);
    const same = await d.deploy({ version: 'v2', functions: [fn('a', 'm2'), fn('b')] }); // identical: fine
    expect(same.version).toBe('v2');
    expect((await d.rollback())!.version).toBe('v1');
    expect(registry.version).toBe('v1');
    expect(registry.defs.map((x) => x.name)).toEqual(['a']);
    expect(await d.rollback()).toBeNull();
    expect(await store.history()).toEqual(['v1']);
    // Without a version, the name comes from the content and is the same everywhere.
    const auto = await d.deploy({ functions: [fn('q')] });
    expect(auto.version).toBe(contentVersion(auto.functions));
    expect(auto.version).toMatch(/^sha-[0-9a-f]{12}$/);
  });
});

describe('redis bundle store: replicas', () => {
  let redis: TestRedis;
  const stores: BundleStore[] = [];
  beforeAll(async () => {
    redis = await TestRedis.start();
  });
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    await redis?.stop();
  });
  const replica = (ns: string) => {
    const s = new RedisBundleStore(redis.url, { namespace: ns, pollMs: 60_000 }); // pub/sub only
    stores.push(s);
    return deployer(s);
  };

  it('the first replica seeds the store; a deploy on one is live on the other within a second; rollback too', async () => {
    const A = replica('r1');
    const B = replica('r1');
    await A.d.start([fn('a') as FunctionDefinition], 'files-1');
    await B.d.start([fn('other') as FunctionDefinition], 'files-2'); // does not overwrite A's seed
    expect(B.registry.version).toBe('files-1');
    expect(B.registry.defs.map((x) => x.name)).toEqual(['a']);
    await new Promise((r) => setTimeout(r, 100)); // subscriptions settle
    const t0 = Date.now();
    await A.d.deploy({ version: 'v2', functions: [fn('a'), fn('b', 'm2')] });
    await waitFor('replica B switched', () => B.registry.version === 'v2', 1000, 5);
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(B.registry.defs.map((x) => x.name)).toEqual(['a', 'b']);
    await B.d.rollback();
    await waitFor('replica A rolled back', () => A.registry.version === 'files-1', 1000, 5);
    expect(await A.store.history()).toEqual(['files-1']);
    // refused bundles do not reach the store or the other replica
    await expect(A.d.deploy({ version: 'v3', functions: [fn('x', 'none')] })).rejects.toBeInstanceOf(BundleRefused);
    expect((await B.store.active())!.version).toBe('files-1');
  });

  it('a version name is refused for different content across replicas', async () => {
    const A = replica('r2');
    const B = replica('r2');
    await A.d.start([fn('a') as FunctionDefinition], 'v1');
    await B.d.start([], 'ignored');
    await A.d.deploy({ version: 'v2', functions: [fn('b')] });
    await expect(B.d.deploy({ version: 'v2', functions: [fn('c')] })).rejects.toBeInstanceOf(BundleVersionConflict);
  });

  it('snapshot and restore: restore writes only into an emptied store; the deployer re-seeds its history and bundle', async () => {
    const A = replica('r3');
    const B = replica('r3');
    await A.d.start([fn('a') as FunctionDefinition], 'v1');
    await B.d.start([], 'ignored');
    await A.d.deploy({ version: 'v2', functions: [fn('a'), fn('b', 'm2')] });
    await B.d.sync();
    expect(B.registry.version).toBe('v2');
    const snap = await A.store.snapshot();
    expect(snap.history).toEqual(['v1', 'v2']);
    expect(snap.bundles.v2!.map((f) => f.name)).toEqual(['a', 'b']);
    expect(await A.store.restore({ history: ['x'], bundles: { x: [] } })).toBe(false); // not empty: kept
    expect(await A.store.history()).toEqual(['v1', 'v2']);

    const wipe = new Redis(redis.url);
    await wipe.del('r3:deploy:bundles', 'r3:deploy:history');
    wipe.disconnect();
    expect(await A.store.active()).toBeNull();
    // Both replicas notice; one writes, the other finds it written. Either way: the same stack.
    await Promise.all([A.d.sync(), B.d.sync()]);
    expect(await A.store.history()).toEqual(['v1', 'v2']);
    expect(await A.store.snapshot()).toEqual(snap); // the store's own JSON, not the parsed copy
    expect(A.registry.version).toBe('v2');
    await A.d.rollback();
    expect(A.registry.version).toBe('v1');
    // The same content under the same name is not a conflict after a re-seed.
    await A.d.deploy({ version: 'v2', functions: [fn('a'), fn('b', 'm2')] });
  });
});

describe('deploy CLI', () => {
  let dir: string;
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'deploy-cli-'));
    fs.writeFileSync(path.join(dir, 'b.json'), JSON.stringify(fn('b')));
    fs.writeFileSync(path.join(dir, 'a.json'), JSON.stringify(fn('a')));
    fs.writeFileSync(path.join(dir, 'notes.txt'), 'ignored');
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('parses flags and the token from GATEWAY_ADMIN_TOKEN', () => {
    expect(parseDeployArgs(['functions/', '--gateway=http://h:1/'], { GATEWAY_ADMIN_TOKEN: 't' })).toEqual({
      folder: 'functions/',
      gateway: 'http://h:1',
      token: 't',
      rollback: false,
    });
    expect(parseDeployArgs(['f', '--gateway=http://h', '--token=x', '--version=v9'], {})).toMatchObject({ token: 'x', version: 'v9' });
    expect(() => parseDeployArgs(['f'], {})).toThrow(/--gateway=URL is required/);
    expect(() => parseDeployArgs(['--gateway=http://h'], {})).toThrow(/folder/);
    expect(readBundle(dir).functions.map((f) => (f as { name: string }).name)).toEqual(['a', 'b']);
  });

  it('PUTs the folder as one bundle with the bearer token and reports refusals', async () => {
    const seen: Array<{ method: string; url: string; auth?: string; body: string }> = [];
    let refuse = false;
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        seen.push({ method: req.method!, url: req.url!, auth: req.headers.authorization, body });
        res.setHeader('Content-Type', 'application/json');
        if (refuse) res.writeHead(400).end(JSON.stringify({ error: { code: 'BUNDLE_INVALID', message: 'bad', errors: ['e1', 'e2'] } }));
        else res.end(JSON.stringify({ version: 'v7', functions: JSON.parse(body || '{"functions":[]}').functions }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const gateway = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const lines: string[] = [];
    expect(await runDeploy({ folder: dir, gateway, token: 'tok', version: 'v7', rollback: false }, (s) => lines.push(s))).toBe(0);
    expect(seen[0]).toMatchObject({ method: 'PUT', url: '/admin/functions', auth: 'Bearer tok' });
    expect(JSON.parse(seen[0]!.body)).toEqual({ version: 'v7', functions: [fn('a'), fn('b')] });
    expect(lines).toEqual(['deployed version v7 (2 functions)']);
    refuse = true;
    expect(await runDeploy({ folder: dir, gateway, rollback: false }, (s) => lines.push(s))).toBe(1);
    expect(lines.slice(1)).toEqual(['refused (HTTP 400): BUNDLE_INVALID: bad', '  e1', '  e2']);
    expect(seen[1]!.auth).toBeUndefined();
    server.close();
  });
});

describe('admin token', () => {
  it('needs GATEWAY_ADMIN_TOKEN set and a matching bearer token', async () => {
    const { checkAdminToken } = await import('../../gateway/deploy/admin-routes.ts');
    const code = (f: () => void) => {
      try {
        f();
        return 'ok';
      } catch (e) {
        return (e as { code: string }).code;
      }
    };
    expect(code(() => checkAdminToken(undefined, 'Bearer x'))).toBe('ADMIN_DISABLED');
    expect(code(() => checkAdminToken('t0k', undefined))).toBe('ADMIN_TOKEN_MISSING');
    expect(code(() => checkAdminToken('t0k', 'Basic dDBr'))).toBe('ADMIN_TOKEN_MISSING');
    expect(code(() => checkAdminToken('t0k', 'Bearer t0'))).toBe('ADMIN_TOKEN_INVALID');
    expect(code(() => checkAdminToken('t0k', 'bearer  t0k '))).toBe('ok');
  });
});
