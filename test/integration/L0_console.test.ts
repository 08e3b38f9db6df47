// The web console in a real browser: the real engine on the bundled models,
// a real gateway, and Debian's Chromium driven by playwright-core. Overview
// lists the models and functions, a live chart receives new points while
// traffic flows, the try-it form uploads a real JPEG and shows the vector,
// uploads a rendered PNG to the real /fn/ocr and draws the lines' boxes over it,
// a wrong admin token shows the catalog's error, and rollback with the right
// one changes the active version. Screenshots of every page (desktop and
// phone width) go to test-artifacts/console/ (gitignored) for a human look.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { listSharedMemoryKeys } from '../../client/shared-memory.ts';
import { shmUnlinkIfExists } from '../../native/index.ts';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { setQuiet } from '../../common/logger.ts';
import { renderText } from '../fixtures/text-images.ts';
import { waitFor } from './L0_gateway-support.ts';
import { BUNDLED_REPO, ROOT, removeDir, startTestEngine } from './helpers.ts';

// The environment this file stubs goes back after it (tests share a worker process: vitest.config.ts).
afterAll(() => vi.unstubAllEnvs());

const CHROMIUM = '/usr/bin/chromium';
const hasChromium = fs.existsSync(CHROMIUM);
if (!hasChromium) console.warn(`L0_console skipped: ${CHROMIUM} is missing (apt-get install -y chromium)`);

const TOKEN = `console-admin-${process.pid}`;
const ART = path.join(ROOT, 'test-artifacts', 'console');
const MODELS = [
  'clip_encoder_model',
  'harmful_filter_model',
  'image_preprocess_model',
  'moderated_search_ensemble',
  'ocr_pipeline_ensemble',
  'product_recommender_model',
  'search_pipeline_ensemble',
];

let engine: Awaited<ReturnType<typeof startTestEngine>>;
let gw: RunningGateway;
let ctx: BrowserContext;
let page: Page;
let tmp: string;
let jpeg: string;
const pageErrors: string[] = [];
const base = () => `http://127.0.0.1:${gw.port}`;

/**
 * The charts re-size after a debounced resize event (charts.js): wait until every chart on the page is no wider
 * than its figure, which it is at once on a page without charts (only the live page has them).
 */
const chartsFit = () =>
  page.waitForFunction(
    () =>
      // Runs in the page (tsconfig has no DOM types: the elements are `any` here).
      [...(globalThis as any).document.querySelectorAll('figure.chart')].every((f: any) => {
        const plot = f.querySelector('.uplot');
        return !plot || plot.getBoundingClientRect().width <= f.getBoundingClientRect().width;
      }),
    undefined,
    { timeout: 5_000 },
  );

async function shot(name: string): Promise<void> {
  await page.screenshot({ path: path.join(ART, `${name}.png`), fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await chartsFit();
  await page.screenshot({ path: path.join(ART, `${name}-phone.png`), fullPage: true });
  expect(await page.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390); // no sideways scrolling at phone width
  await page.setViewportSize({ width: 1280, height: 900 });
}

/** The bounding box [x0, y0, x1, y1] of the dark pixels in each horizontal band [top, bottom) of an image. */
async function inkBounds(file: string, bands: Array<[number, number]>): Promise<number[][]> {
  const { data, info } = await sharp(file).greyscale().raw().toBuffer({ resolveWithObject: true });
  return bands.map(([top, bottom]) => {
    const b = [Infinity, Infinity, -Infinity, -Infinity];
    for (let y = top; y < bottom; y++) {
      for (let x = 0; x < info.width; x++) {
        if (data[y * info.width + x]! < 128)
          b.splice(0, 4, Math.min(b[0]!, x), Math.min(b[1]!, y), Math.max(b[2]!, x + 1), Math.max(b[3]!, y + 1));
      }
    }
    return b;
  });
}

const callImage = (body: Buffer, headers: Record<string, string> = {}) =>
  fetch(`${base()}/fn/image_search`, { method: 'POST', body, headers: { 'Content-Type': 'image/jpeg', ...headers } });

describe.skipIf(!hasChromium)('web console in Chromium', () => {
  beforeAll(async () => {
    setQuiet(true);
    vi.stubEnv('GATEWAY_ADMIN_TOKEN', TOKEN);
    delete process.env.GATEWAY_CONSOLE_TOKEN;
    fs.mkdirSync(ART, { recursive: true });
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), `console-${process.pid}-`));
    const fnDir = path.join(tmp, 'functions');
    fs.mkdirSync(fnDir);
    for (const f of fs.readdirSync(path.join(ROOT, 'functions'))) fs.copyFileSync(path.join(ROOT, 'functions', f), path.join(fnDir, f));
    // image_search also accepts async calls here, so the Jobs page has a job to show.
    const def = JSON.parse(fs.readFileSync(path.join(fnDir, 'image_search.json'), 'utf8'));
    fs.writeFileSync(path.join(fnDir, 'image_search.json'), JSON.stringify({ ...def, async: { enabled: true } }));
    // A real photo-like JPEG above the 64 KiB staging threshold: noise compresses badly.
    jpeg = path.join(tmp, 'noise.jpg');
    await sharp(randomBytes(400 * 300 * 3), { raw: { width: 400, height: 300, channels: 3 } })
      .jpeg({ quality: 90 })
      .toFile(jpeg);

    // Chromium starts while the engine loads the bundled models.
    const browser = chromium.launchPersistentContext(path.join(tmp, 'chromium-profile'), {
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
    // Held at once, so that afterAll closes it also when the engine or gateway fails to start.
    browser.then(
      (c) => (ctx = c),
      () => undefined,
    );
    engine = await startTestEngine({ modelRepository: BUNDLED_REPO, httpPort: -1, metricsPort: -1 });
    gw = await startGateway({
      port: 0,
      host: '127.0.0.1',
      engine: `127.0.0.1:${engine.grpcPort}`,
      functions: fnDir,
      prefix: `tgwc${process.pid}`,
      arenaRegions: 1,
      arenaRegionBytes: 4 * 1024 * 1024,
      consoleSampleMs: 500,
    });
    ctx = await browser;
    page = ctx.pages()[0] ?? (await ctx.newPage());
    // Any script error or CSP violation on a console page fails the suite.
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('console', (m) => {
      if (m.type() === 'error' && !/status of (401|403|503)/.test(m.text())) pageErrors.push(m.text());
    });
  }, 120_000);

  afterAll(async () => {
    // Stop first, assert after: a failed assertion must not leave the gateway's regions in /dev/shm.
    try {
      await ctx?.close();
      await gw?.stop();
    } finally {
      await engine?.stop();
      removeDir(tmp);
      for (const k of listSharedMemoryKeys(`/tgwc${process.pid}_`)) shmUnlinkIfExists(k); // only after a failed stop
    }
    expect(pageErrors).toEqual([]);
  }, 60_000);

  it('overview lists every bundled model and every function', async () => {
    await page.goto(`${base()}/console`);
    await page.waitForSelector('#models tbody tr[data-model="clip_encoder_model"]');
    for (const m of MODELS) {
      await expect(page.locator(`#models tr[data-model="${m}"]`).first().textContent()).resolves.toContain('READY');
    }
    const clip = (await page.locator('#models tr[data-model="clip_encoder_model"]').textContent()) ?? '';
    expect(clip).toMatch(/2 × KIND_CPU/);
    expect(clip).toMatch(/preferred 4, 8, 16/);
    expect(clip).toMatch(/MiB/);
    const fns = await page.locator('#functions tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-function')));
    expect(fns).toEqual(
      expect.arrayContaining(['image_search', 'ocr', 'product_recommender', 'search_pipeline_ensemble', 'moderated_search_ensemble']),
    );
    expect(await page.locator('#functions tr[data-function="product_recommender"]').textContent()).toContain(
      'API key (RECOMMENDER_API_KEYS)',
    );
    expect(await page.locator('#engine').textContent()).toContain('Ready');
    // Keyboard: the first Tab reaches the skip link, the next ones the page links.
    await page.keyboard.press('Tab');
    expect(await page.evaluate<string>('document.activeElement?.textContent')).toBe('Skip to content');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Tab');
    expect(await page.evaluate<string>("document.activeElement?.getAttribute('href')")).toBe('/console/live');
    await shot('overview');
  });

  it('a live chart receives new points as traffic flows', async () => {
    await page.goto(`${base()}/console/live`);
    const points = async () => Number(await page.locator('#chart-rps').getAttribute('data-points'));
    await waitFor('first chart points', async () => (await points()) >= 1, 15_000, 100);
    const before = await points();
    const body = fs.readFileSync(jpeg);
    for (let i = 0; i < 12; i++) expect((await callImage(body)).status).toBe(200);
    await waitFor('points after traffic', async () => (await points()) > before, 15_000, 100);
    // The table shows the latest point; keep traffic flowing so the newest
    // sample window holds some (a burst that ends before a sample shows 0/s).
    let flowing = true;
    const traffic = (async () => {
      while (flowing) expect((await callImage(body)).status).toBe(200);
    })();
    try {
      const rate = page.locator('#chart-rps td[data-series="clip_encoder_model"]');
      await waitFor('a non-zero request rate', async () => Number(await rate.textContent()) > 0, 15_000, 100);
      await waitFor(
        'a latency percentile',
        async () => Number(await page.locator('#chart-latency td[data-series="image_search p95"]').textContent()) > 0,
        15_000,
        100,
      );
    } finally {
      flowing = false;
      await traffic;
    }
    expect(await page.locator('#chart-rps canvas').count()).toBeGreaterThan(0);
    await shot('live');
  });

  it('try-it uploads a JPEG and shows the embedding and transfer headers', async () => {
    await page.goto(`${base()}/console/try#image_search`);
    await page.waitForSelector('#in-image');
    await page.setInputFiles('#in-image', jpeg);
    await page.click('#try-form button[type=submit]');
    await page.waitForSelector('#try-outputs [data-output="embedding"]');
    expect(await page.locator('#try-status').textContent()).toBe('200');
    expect(await page.locator('[data-output="embedding"] [data-length]').textContent()).toBe('512');
    expect(await page.locator('#try-meta [data-header="x-payload-transfer"]').textContent()).toMatch(/^(shm|inline)$/);
    await shot('try-it');
    // A tensor function without its API key: the catalog's error, in words.
    await page.selectOption('#try-fn', 'product_recommender');
    await page.waitForSelector('#in-user_features');
    await page.click('#try-form button[type=submit]');
    await expect(page.locator('#try-error').textContent()).resolves.toContain("function 'product_recommender' requires an API key");
  });

  it('try-it on /fn/ocr reads a rendered PNG and draws a box over each recognised line', async () => {
    // Two lines the real PP-OCRv4 models read exactly (L0_ocr): DejaVu Sans at 56 px.
    const W = 1000;
    const H = 260;
    const LINES = [
      { text: 'Invoice No. 4711-B', x: 40, y: 90, size: 56 },
      { text: 'Total: $1,234.56 (VAT 19%)', x: 40, y: 200, size: 56 },
    ];
    const png = path.join(tmp, 'invoice.png');
    fs.writeFileSync(png, await renderText(W, H, LINES));
    // Ground truth for "the box sits over the text": each line's ink, from the image's own pixels.
    const ink = await inkBounds(png, [
      [0, 145],
      [145, H],
    ]);
    await page.goto(`${base()}/console/try#ocr`);
    await page.waitForSelector('#in-image');
    await page.setInputFiles('#in-image', png);
    await page.click('#try-form button[type=submit]');
    await page.waitForSelector('#try-overlay svg polygon', { timeout: 30_000 });
    expect(await page.locator('#try-status').textContent()).toBe('200');
    expect(await page.locator('#try-overlay .lines li').allTextContents()).toEqual(LINES.map((l) => l.text));
    expect(await page.locator('#try-overlay svg polygon').count()).toBe(LINES.length);
    expect(await page.locator('#try-overlay svg').getAttribute('viewBox')).toBe(`0 0 ${W} ${H}`);
    expect(await page.locator('[data-output="lines"] [data-length]').textContent()).toBe(String(LINES.length));
    // Where the browser actually drew each polygon, in the image's pixels: each edge
    // within 10 px of the line's ink (the detector's box hugs the glyphs to a few px; a
    // scaled or shifted overlay misses by tens of px). At desktop width the image shows at
    // its own size, at phone width scaled down to about a third.
    const drawnOverInk = async (): Promise<number> => {
      // The callback runs in the page (tsconfig has no DOM types: the elements are `any` here).
      const { scale, boxes } = await page.locator('#try-overlay svg polygon').evaluateAll((ps: any[]) => {
        const img = (globalThis as any).document.querySelector('#try-overlay img');
        const ir = img.getBoundingClientRect();
        const k = img.naturalWidth / ir.width;
        return {
          scale: k,
          boxes: ps.map((p) => {
            const r = p.getBoundingClientRect();
            return [(r.left - ir.left) * k, (r.top - ir.top) * k, (r.right - ir.left) * k, (r.bottom - ir.top) * k];
          }),
        };
      });
      for (const [i, edges] of boxes.entries()) {
        for (const [j, edge] of ['left', 'top', 'right', 'bottom'].entries()) {
          expect(
            Math.abs(edges[j]! - ink[i]![j]!),
            `line ${i} ${edge} at scale ${scale}: drawn ${edges[j]}, ink ${ink[i]![j]}`,
          ).toBeLessThanOrEqual(10);
        }
      }
      return scale;
    };
    expect(await drawnOverInk()).toBeCloseTo(1, 2);
    await page.setViewportSize({ width: 390, height: 844 });
    await waitFor('the image shown scaled down', async () => (await drawnOverInk()) > 2, 5_000, 100);
    await page.setViewportSize({ width: 1280, height: 900 });
    await shot('try-it-ocr');
  });

  it('try-it on the streaming /fn/ocr_stream lists each line as it arrives and outlines it', async () => {
    // Lines the real models read exactly at 56 px (the bench's receipts).
    const LINES = ['Invoice No. 4711-B', 'Total: $1,234.56', 'Due 2026-12-31', 'HELLO 2026'].map((text, i) => ({
      text,
      x: 40,
      y: 90 + i * 110,
      size: 56,
    }));
    const png = path.join(tmp, 'page.png');
    fs.writeFileSync(png, await renderText(900, 480, LINES));
    // When each list item appears in the page (the stream shown as it comes, not at the end).
    await page.goto(`${base()}/console/try#ocr_stream`);
    await page.waitForSelector('#in-image');
    await page.setInputFiles('#in-image', png);
    await page.evaluate(() => {
      const g = globalThis as any; // runs in the page (no DOM types here)
      g.__seen = [];
      const t0 = g.performance.now();
      new g.MutationObserver(() => {
        const n = g.document.querySelectorAll('#try-stream li').length;
        if (n > g.__seen.length) g.__seen.push(g.performance.now() - t0);
      }).observe(g.document.getElementById('try-outputs'), { childList: true, subtree: true });
    });
    await page.click('#try-form button[type=submit]');
    await page.waitForFunction(
      () => /^end/.test((globalThis as any).document.getElementById('try-stream-state')?.textContent ?? ''),
      undefined,
      { timeout: 60_000 },
    );
    expect(await page.locator('#try-status').textContent()).toBe('200');
    expect(await page.locator('#try-stream li').allTextContents()).toEqual(LINES.map((l) => l.text));
    expect(await page.locator('#try-stream-state').textContent()).toMatch(/^end: 4 response/);
    expect(await page.locator('#try-overlay svg polygon').count()).toBe(LINES.length);
    // The list grew while the stream ran, not once at the end (lines read close together may share one update).
    const seen = (await page.evaluate(() => (globalThis as any).__seen)) as number[];
    expect(seen.length).toBeGreaterThanOrEqual(2);
    await shot('try-it-ocr-stream');
  }, 90_000);

  it('rollback with the admin token changes the active version; a wrong token shows the error', async () => {
    const { functions } = (await (await fetch(`${base()}/admin/functions`, { headers: { Authorization: `Bearer ${TOKEN}` } })).json()) as {
      functions: unknown[];
    };
    for (const version of ['console-a', 'console-b']) {
      const r = await fetch(`${base()}/admin/functions`, {
        method: 'PUT',
        headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ version, functions }),
      });
      expect(r.status).toBe(200);
    }
    await page.goto(`${base()}/console/deploys`);
    await waitFor('active version shown', async () => (await page.locator('#active-version').textContent()) === 'console-b', 10_000, 100);
    expect(await page.locator('#deploy-history li').allTextContents()).toEqual(
      expect.arrayContaining([expect.stringContaining('console-a')]),
    );

    await page.fill('#admin-token', 'not-the-token');
    await page.click('#rollback button[type=submit]');
    await waitFor(
      'the error',
      async () => /the admin token is not valid/.test((await page.locator('#rollback-status').textContent()) ?? ''),
      10_000,
      100,
    );
    expect(await page.locator('#rollback-status').textContent()).toContain('ADMIN_TOKEN_INVALID');
    expect(await page.locator('#active-version').textContent()).toBe('console-b');
    await shot('deploys-wrong-token');

    await page.fill('#admin-token', TOKEN);
    await page.click('#rollback button[type=submit]');
    await waitFor('rolled back', async () => (await page.locator('#active-version').textContent()) === 'console-a', 10_000, 100);
    expect(gw.deployer.active?.version).toBe('console-a');
    await shot('deploys');
  });

  it('with GATEWAY_CONSOLE_TOKEN set, the page asks for the token and then shows the state', async () => {
    vi.stubEnv('GATEWAY_CONSOLE_TOKEN', `console-view-${process.pid}`);
    try {
      await page.goto(`${base()}/console`);
      await page.waitForSelector('#console-token:not([hidden])');
      expect(await page.locator('#page-error').textContent()).toContain('CONSOLE_TOKEN_MISSING');
      expect(await page.locator('#models tbody tr').count()).toBe(0);
      await page.fill('#console-token-input', process.env.GATEWAY_CONSOLE_TOKEN!);
      await page.press('#console-token-input', 'Enter');
      await page.waitForSelector('#models tbody tr[data-model="clip_encoder_model"]');
      expect(await page.locator('#page-error').isHidden()).toBe(true);
    } finally {
      delete process.env.GATEWAY_CONSOLE_TOKEN;
    }
  });

  it('jobs lists a recent async call with its status', async () => {
    const r = await callImage(fs.readFileSync(jpeg), { Prefer: 'respond-async' });
    expect(r.status).toBe(202);
    const { id } = (await r.json()) as { id: string };
    // The page reads the list when it opens (then every 3 s): open it once the job has finished.
    await waitFor(
      'job succeeded',
      async () => ((await (await fetch(`${base()}/jobs/${id}`)).json()) as { status: string }).status === 'succeeded',
      15_000,
      50,
    );
    await page.goto(`${base()}/console/jobs`);
    const row = page.locator(`#jobs tr[data-job="${id}"]`);
    await waitFor('job succeeded in the list', async () => /succeeded/.test((await row.textContent()) ?? ''), 15_000, 100);
    expect(await row.textContent()).toContain('image_search');
    await shot('jobs');
  });
});
