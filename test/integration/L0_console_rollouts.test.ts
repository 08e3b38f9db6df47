// The Deploys page in Chromium while a rollout runs: the real engine, a real
// gateway, Debian's Chromium driven by playwright-core (as L0_console). The
// page shows the canary's share and both sides' calls, errors and p95 for
// the step in progress, then the decision once it ends (here by hand) with its reason, and the
// usage plans with their usage. Screenshots go to test-artifacts/console/.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { keyId } from '../../gateway/plans/usage-plan.ts';
import { setQuiet } from '../../common/logger.ts';
import { removeDir, ROOT, startTestEngine } from './helpers.ts';
import { TOKEN, admin, callF, functionDir, writeEchoModel } from './L0_delivery-support.ts';

// The environment this file stubs goes back after it (tests share a worker process: vitest.config.ts).
afterAll(() => vi.unstubAllEnvs());

const CHROMIUM = '/usr/bin/chromium';
const hasChromium = fs.existsSync(CHROMIUM);
if (!hasChromium) console.warn(`L0_console_rollouts skipped: ${CHROMIUM} is missing (apt-get install -y chromium)`);
const ART = path.join(ROOT, 'test-artifacts', 'console');

let engine: Awaited<ReturnType<typeof startTestEngine>>;
let gw: RunningGateway;
let ctx: BrowserContext;
let page: Page;
let tmp: string;
let fnDir: string;
const pageErrors: string[] = [];

describe.skipIf(!hasChromium)('Deploys page with a rollout in progress', () => {
  beforeAll(async () => {
    setQuiet(true);
    vi.stubEnv('GATEWAY_ADMIN_TOKEN', TOKEN);
    delete process.env.GATEWAY_CONSOLE_TOKEN;
    fs.mkdirSync(ART, { recursive: true });
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), `console-ro-${process.pid}-`));
    writeEchoModel(tmp, 'echo_a');
    writeEchoModel(tmp, 'echo_slow', { delayMs: 40 });
    engine = await startTestEngine({ modelRepository: tmp, httpPort: -1, metricsPort: -1 });
    fnDir = functionDir();
    gw = await startGateway({
      port: 0,
      host: '127.0.0.1',
      engine: `127.0.0.1:${engine.grpcPort}`,
      functions: fnDir,
      shm: false,
      rolloutTickMs: 100,
    });
    ctx = await chromium.launchPersistentContext(path.join(tmp, 'chromium-profile'), {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
      ],
      viewport: { width: 1280, height: 900 },
    });
    page = ctx.pages()[0] ?? (await ctx.newPage());
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('console', (m) => {
      if (m.type() === 'error') pageErrors.push(m.text());
    });
  }, 120_000);

  afterAll(async () => {
    try {
      await ctx?.close();
      await gw?.stop();
    } finally {
      await engine?.stop();
      removeDir(tmp);
      removeDir(fnDir);
    }
    expect(pageErrors).toEqual([]);
  }, 60_000);

  it('shows the share, both sides per step, then the rollback and why; and the plans', async () => {
    await admin(gw, 'PUT', `/admin/plans/${keyId('some-key')}`, {
      name: 'gold',
      rps: 50,
      burst: 100,
      quota: { period: 'month', limit: 1000 },
    });
    const r = await admin(gw, 'POST', '/admin/rollouts', {
      function: 'f',
      next: { target: { model: 'echo_slow' } },
      steps: [{ share: 30, holdMs: 600_000 }, { share: 100 }],
      gates: { minCalls: 1_000_000 },
    });
    expect(r.status).toBe(201);
    await Promise.all(Array.from({ length: 60 }, () => callF(gw)));
    await page.goto(`http://127.0.0.1:${gw.port}/console/deploys`);
    const card = page.locator(`article[data-rollout="${r.body.id}"]`);
    await card.waitFor();
    await expect(card.locator('dd.share').textContent()).resolves.toBe('30 %');
    await page.waitForFunction(
      `/calls/.test(document.querySelector('article[data-rollout="${r.body.id}"] tr[data-step="0"] td.canary')?.textContent ?? '')`,
    );
    const stable = (await card.locator('tr[data-step="0"] td.stable').textContent()) ?? '';
    const canary = (await card.locator('tr[data-step="0"] td.canary').textContent()) ?? '';
    expect(stable).toMatch(/^\d+ calls, 0 errors, p95 [\d.]+ ms$/);
    expect(canary).toMatch(/^\d+ calls, 0 errors, p95 [\d.]+ ms$/);
    expect(Number(stable.split(' ')[0]) + Number(canary.split(' ')[0])).toBe(60);
    await expect(page.locator(`#plans tr[data-key="${keyId('some-key')}"]`).textContent()).resolves.toContain('gold');
    await page.screenshot({ path: path.join(ART, 'deploys-rollout.png'), fullPage: true });
    // End it by hand: the page shows the decision and the reason.
    await admin(gw, 'POST', `/admin/rollouts/${r.body.id}/abort`);
    await page.waitForSelector(`article[data-rollout="${r.body.id}"][data-state="aborted"]`, { timeout: 10_000 });
    await expect(card.locator('tr[data-step="0"] td.reason').textContent()).resolves.toBe('aborted by the operator');
    await expect(card.locator('dd.share').textContent()).resolves.toBe('—');
  }, 60_000);
});
