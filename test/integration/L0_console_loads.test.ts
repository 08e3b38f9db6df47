// The console's overview shows each model's cold loads, last cold-load time
// and evictions under the engine's memory budget: a real engine (its own
// process, so its RSS charges are its alone) in on-demand mode with room for
// one of two real ONNX models (128 MiB initializers), so calls alternating
// between them evict and load them again; a real gateway
// reads the figures from the engine's HTTP repository index (the gRPC index
// has no such fields) and its JSON API and page (Chromium, when installed)
// show them as the engine counts them. Without the engine's HTTP address the
// figures are null, not zero.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stopAll, stopChild } from '../bench/processes.ts';
import { repoIndex, spawnEngine, spawnEngineMeanwhile, type EngineProc } from '../bench/sharing-support.ts';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { setQuiet } from '../../common/logger.ts';
import { ElemType, GraphBuilder } from '../../model_repository/onnx-builder.ts';
import { httpJson, removeDir, tempRepo } from './helpers.ts';

const CHROMIUM = '/usr/bin/chromium';
const IN = 64;

function bigMlp(seed: number): Uint8Array {
  const g = new GraphBuilder(`big_mlp_${seed}`, seed);
  g.input('x', ElemType.FLOAT, ['batch', IN]);
  const h = g.node('MatMul', ['x', g.randomWeight('w', [IN, 524288], IN)]);
  g.node('ReduceMean', [h], { axes: [1], keepdims: 1 }, 'y');
  g.output('y', ElemType.FLOAT, ['batch', 1]);
  return g.build();
}
const config = (name: string) => `name: "${name}"
platform: "onnxruntime_onnx"
max_batch_size: 4
input [ { name: "x", data_type: TYPE_FP32, dims: [ ${IN} ] } ]
output [ { name: "y", data_type: TYPE_FP32, dims: [ 1 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
`;

let repo: string;
let fnDir: string;
let engine: EngineProc;
let gw: RunningGateway;
let bare: RunningGateway;
let pendingM1: ReturnType<typeof httpJson> | undefined;
/** Chromium for the page case, launched in beforeAll while the models are built and the engines start. */
let browser: Promise<BrowserContext> | undefined;
const hasChromium = fs.existsSync(CHROMIUM);

const gateway = (httpAddress: string | undefined) =>
  startGateway({
    port: 0,
    host: '127.0.0.1',
    engine: `127.0.0.1:${engine.grpc}`,
    transport: { engineHttp: httpAddress },
    functions: fnDir,
    prefix: `tgwl${process.pid}`,
    shm: false,
    consoleSampleMs: 60_000,
  });
const infer = async (model: string, port = engine.http) => {
  const { status, json } = await httpJson(port, 'POST', `/v2/models/${model}/infer`, {
    inputs: [{ name: 'x', datatype: 'FP32', shape: [1, IN], data: new Array(IN).fill(0.5) }],
  });
  expect(status, `${JSON.stringify(json)} ${JSON.stringify(await repoIndex(port))}`).toBe(200);
};
/** The engine's own books (its HTTP index) for a model. */
const books = async (model: string) => (await repoIndex(engine.http)).find((x) => x.name === model);
type Row = { name: string; state: string; coldLoads: number | null; lastColdLoadMs: number | null; evictions: number | null };
const overview = async (g: RunningGateway) => {
  const { status, json } = await httpJson(g.port, 'GET', '/console/api/overview');
  expect(status).toBe(200);
  return json as { engine: { loadsError: string | null }; models: Row[] };
};

beforeAll(async () => {
  setQuiet(true);
  delete process.env.GATEWAY_CONSOLE_TOKEN;
  delete process.env.GATEWAY_ENGINE_HTTP;
  fnDir = fs.mkdtempSync(path.join(os.tmpdir(), `console-loads-${process.pid}-`));
  if (hasChromium) {
    browser = chromium.launchPersistentContext(path.join(fnDir, 'chromium-profile'), {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
    });
    browser.catch(() => undefined); // a failed launch fails the page case, which awaits it
  }
  repo = tempRepo('l0-console-loads');
  // What a load of m0 is charged, from a probe engine of the same run with a budget nothing reaches (the charge is
  // measured RSS, which differs between Node 20 and 24); the budget holds one such and not two (m0 and m1 are the
  // same size), with the rest as room for the engine's own growth, so each load of the other model evicts the
  // resident one. The probe's process starts while the models are built here (in on-demand mode it loads
  // nothing until asked, and it reads the repository's directory at each request).
  const probeStarting = spawnEngineMeanwhile(repo, [`--model-memory-budget=${2 ** 40}`]);
  await probeStarting.spawned;
  ['m0', 'm1'].forEach((m, i) => {
    fs.mkdirSync(path.join(repo, m, '1'), { recursive: true });
    fs.writeFileSync(path.join(repo, m, 'config.pbtxt'), config(m));
    fs.writeFileSync(path.join(repo, m, '1', 'model.onnx'), bigMlp(i + 1));
  });
  const probe = await probeStarting.ready;
  let charge: number;
  try {
    await infer('m0', probe.http);
    charge = (await repoIndex(probe.http)).find((x) => x.name === 'm0')!.resident_bytes!;
  } finally {
    await stopChild(probe.child);
  }
  expect(charge, 'probe charge of m0').toBeGreaterThanOrEqual(128 * 2 ** 20); // at least the weights
  engine = await spawnEngine(repo, [`--model-memory-budget=${Math.floor(charge * 1.6)}`, '--on-demand-load-timeout-secs=120']);
  [gw, bare] = await Promise.all([gateway(`127.0.0.1:${engine.http}`), gateway(undefined)]);
}, 120_000);

afterAll(async () => {
  // m1's call ends one way or the other: loaded after the RSS fell, or refused when no room came in time.
  if (pendingM1) expect([200, 503]).toContain((await pendingM1).status);
  // The gateways and Chromium stop side by side.
  await Promise.all([bare?.stop(), gw?.stop(), browser?.then((c) => c.close()).catch(() => undefined)]);
  await stopAll();
  removeDir(repo);
  if (fnDir) removeDir(fnDir);
});

describe('console: cold loads and evictions', () => {
  it("the overview JSON carries each model's cold loads, last cold-load ms and evictions as the engine counts them", async () => {
    await infer('m0');
    // m1's load evicts m0. Whether m1 then fits depends on how fast the engine's RSS falls (an evicted
    // session is freed when collected), so the call is not waited for here, only its end at the close.
    pendingM1 = httpJson(engine.http, 'POST', '/v2/models/m1/infer', {
      inputs: [{ name: 'x', datatype: 'FP32', shape: [1, IN], data: new Array(IN).fill(0.5) }],
    });
    const deadline = Date.now() + 60_000;
    while (((await books('m0'))?.evicted ?? 0) < 1) {
      expect(Date.now(), 'm0 was not evicted within 60 s').toBeLessThan(deadline);
      await new Promise((r) => setTimeout(r, 200));
    }
    const m0 = (await books('m0'))!;
    expect(m0).toMatchObject({ cold_loads: 1, evicted: 1 });
    const { engine: e, models } = await overview(gw);
    expect(e.loadsError).toBeNull();
    // Every model is listed, the evicted one too.
    expect(models.map((r) => r.name).sort()).toEqual(['m0', 'm1']);
    for (const r of models) {
      const b = (await books(r.name))!;
      expect(r).toMatchObject({
        coldLoads: b.cold_loads ?? null,
        lastColdLoadMs: b.last_cold_load_ms ?? null,
        evictions: b.evicted ?? null,
      });
    }
    expect(models.find((r) => r.name === 'm0')).toMatchObject({ state: 'UNAVAILABLE', coldLoads: 1, evictions: 1 });
    expect(models.find((r) => r.name === 'm0')!.lastColdLoadMs).toBeGreaterThan(0);
  }, 120_000);

  it("without the engine's HTTP address the figures are null (unknown), not zero", async () => {
    const { models } = await overview(bare);
    expect(models.map((r) => r.name).sort()).toEqual(['m0', 'm1']);
    for (const r of models) expect(r).toMatchObject({ coldLoads: null, lastColdLoadMs: null, evictions: null });
  });

  it('an unreachable HTTP address is named on the overview, and the models are still listed', async () => {
    const wrong = await gateway('127.0.0.1:1');
    try {
      const { engine: e, models } = await overview(wrong);
      expect(e.loadsError).toMatch(/127\.0\.0\.1:1|fetch failed|ECONNREFUSED/);
      expect(models.map((r) => r.name).sort()).toEqual(['m0', 'm1']);
    } finally {
      await wrong.stop();
    }
  });

  it.skipIf(!hasChromium)(
    'the overview page shows them in the models table',
    async () => {
      const ctx = await browser!;
      try {
        const page = ctx.pages()[0] ?? (await ctx.newPage());
        const errors: string[] = [];
        page.on('pageerror', (err) => errors.push(err.message));
        await page.goto(`http://127.0.0.1:${gw.port}/console`);
        await page.waitForSelector('#models tbody tr[data-model="m0"]');
        const m0 = (await books('m0'))!;
        const cells = await page.locator('#models tr[data-model="m0"] td').allTextContents();
        expect(cells.slice(-3)).toEqual([String(m0.cold_loads), `${m0.last_cold_load_ms} ms`, String(m0.evicted)]);
        const heads = await page.locator('#models thead th').allTextContents();
        expect(heads.slice(-3)).toEqual(['Cold loads', 'Last cold load', 'Evictions']);
        expect(errors).toEqual([]);
      } finally {
        await ctx.close();
      }
    },
    60_000,
  );
});
