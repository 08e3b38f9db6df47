// An engine outage answers 503 ENGINE_UNAVAILABLE on every /fn path, never
// 404: calls to a name the gateway has not seen as an ensemble (an implicit
// function it cannot look up while the engine is away), to a gateway started
// while the engine was already down, and again within the registry's refresh
// interval. The real engine (a two-step js ensemble) and real gateways
// (quiet under vitest: its ENGINE_QUIET=1 silences both processes' logs).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEngine } from '../../engine/server/server.ts';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { ENS_ECHO_CONFIG, writeTestRepository } from '../fixtures/test-models.ts';

type Engine = Awaited<ReturnType<typeof startEngine>>;
type Json = { error: { code: string; message: string } };

let repo: string;
let fnDir: string;
let engine: Engine | undefined;
const gateways: RunningGateway[] = [];

const gatewayOn = async (address: string): Promise<{ gw: RunningGateway; base: string }> => {
  const gw = await startGateway({ port: 0, host: '127.0.0.1', engine: address, functions: fnDir, shm: false, console: false });
  gateways.push(gw);
  return { gw, base: `http://127.0.0.1:${gw.port}` };
};
const call = (base: string, fn: string) =>
  fetch(`${base}/fn/${fn}`, {
    method: 'POST',
    body: JSON.stringify({ inputs: { X: [1, 2] } }),
    headers: { 'Content-Type': 'application/json' },
  });

beforeAll(async () => {
  repo = writeTestRepository(fs.mkdtempSync(path.join(os.tmpdir(), 'gw-outage-')), ['js_echo']);
  fs.mkdirSync(path.join(repo, 'ens_echo', '1'), { recursive: true });
  fs.writeFileSync(path.join(repo, 'ens_echo', 'config.pbtxt'), ENS_ECHO_CONFIG);
  fnDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-outage-fn-')); // no explicit functions: ens_echo is implicit
  engine = await startEngine({ modelRepository: repo, grpcPort: 0, httpPort: -1, metricsPort: -1 });
}, 120_000);

afterAll(async () => {
  for (const g of gateways) await g.stop();
  await engine?.stop();
  for (const d of [repo, fnDir]) if (d) fs.rmSync(d, { recursive: true, force: true });
});

describe('engine outage', () => {
  it('answers 503 ENGINE_UNAVAILABLE, not 404, while the engine is down', async () => {
    const address = `127.0.0.1:${engine!.grpcPort}`;
    const { base } = await gatewayOn(address);
    // Engine up: the implicit ensemble answers, an unknown name is a 404.
    const ok = await call(base, 'ens_echo');
    expect(ok.status).toBe(200);
    const unknown = await call(base, 'no_such_fn');
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as Json).error.code).toBe('FUNCTION_NOT_FOUND');

    await engine!.stop();
    engine = undefined;
    // Past the registry's refresh interval (2 s), a name it has not seen: it cannot know whether the engine serves it.
    await new Promise((r) => setTimeout(r, 2100));
    for (let i = 0; i < 2; i++) {
      const r = await call(base, 'no_such_fn');
      expect(r.status, `call ${i}`).toBe(503);
      const body = (await r.json()) as Json;
      expect(body.error.code).toBe('ENGINE_UNAVAILABLE');
      expect(body.error.message).toContain(address);
    }
    const known = await call(base, 'ens_echo');
    expect(known.status).toBe(503);
    expect(((await known.json()) as Json).error.code).toBe('ENGINE_UNAVAILABLE');

    // A gateway started while the engine is already down knows no ensembles yet: still 503, twice within the refresh interval.
    const late = await gatewayOn(address);
    for (const route of ['POST', 'GET']) {
      const r = route === 'POST' ? await call(late.base, 'ens_echo') : await fetch(`${late.base}/fn/ens_echo`);
      expect(r.status, route).toBe(503);
      expect(((await r.json()) as Json).error.code, route).toBe('ENGINE_UNAVAILABLE');
    }
    // The listing still answers, saying nothing is callable now.
    const list = await fetch(`${late.base}/fn`);
    expect(list.status).toBe(200);
    expect(((await list.json()) as { functions: unknown[] }).functions).toEqual([]);
  });
});
