// The streaming OCR function on the real PP-OCRv4 weights: /fn/ocr_stream
// sends each line of a rendered 20-line page as it is read (server-sent
// events, rows mapping applied), its lines equal /fn/ocr's, the first one
// arrives well before the last, and a client that goes away stops the model.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { setQuiet } from '../../common/logger.ts';
import { BUNDLED_REPO, ROOT, removeDir, startTestEngine } from './helpers.ts';
import { renderText } from '../fixtures/text-images.ts';

const OCR_MODELS = ['ocr_det_model', 'ocr_rec_model', 'ocr_det_preprocess', 'ocr_recognize', 'ocr_pipeline_ensemble', 'ocr_stream'];
const WORDS = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel', 'india', 'juliet'];

let engine: Awaited<ReturnType<typeof startTestEngine>>;
let repo: string;
let fnDir: string;
let gw: RunningGateway;

/** A page of 20 numbered lines of words, 40 px apart. */
export function twentyLinePage(): Promise<Buffer> {
  const lines = Array.from({ length: 20 }, (_, i) => ({
    text: `${i + 1} ${WORDS[i % 10]} ${WORDS[(i * 3 + 1) % 10]} ${1000 + i * 37}`,
    x: 30,
    y: 40 + i * 40,
    size: 28,
  }));
  return renderText(700, 840, lines);
}

const fn = (name: string, body: Buffer, accept?: string) =>
  fetch(`http://127.0.0.1:${gw.port}/fn/${name}`, {
    method: 'POST',
    body,
    headers: { 'content-type': 'image/png', ...(accept ? { accept } : {}) },
  });

beforeAll(async () => {
  setQuiet(true);
  repo = fs.mkdtempSync(path.join(os.tmpdir(), `ocr-stream-${process.pid}-`));
  for (const m of OCR_MODELS) fs.cpSync(path.join(BUNDLED_REPO, m), path.join(repo, m), { recursive: true });
  engine = await startTestEngine({ modelRepository: repo, httpPort: -1, metricsPort: -1 });
  fnDir = fs.mkdtempSync(path.join(os.tmpdir(), `ocr-stream-fn-${process.pid}-`));
  for (const f of ['ocr.json', 'ocr_stream.json']) fs.copyFileSync(path.join(ROOT, 'functions', f), path.join(fnDir, f));
  // A low staging threshold: the page's body lands in a staging slice, which the stream sends inline.
  gw = await startGateway({
    port: 0,
    host: '127.0.0.1',
    engine: `127.0.0.1:${engine.grpcPort}`,
    functions: fnDir,
    redisUrl: '',
    shmThreshold: 1024,
    arenaRegions: 1,
    arenaRegionBytes: 4 << 20,
    prefix: `ocrs${process.pid}`,
  });
}, 180_000);

afterAll(async () => {
  await gw?.stop();
  await engine?.stop();
  removeDir(repo);
  removeDir(fnDir);
});

describe('/fn/ocr_stream', () => {
  it('sends the 20 lines of a page one event each, equal to /fn/ocr, the first well before the last', async () => {
    const page = await twentyLinePage();
    const whole = (await (await fn('ocr', page)).json()) as { lines: Array<{ text: string }> };
    expect(whole.lines.length).toBe(20);
    const t0 = performance.now();
    const r = await fn('ocr_stream', page, 'text/event-stream');
    if (!r.headers.get('content-type')?.includes('text/event-stream')) throw new Error(await r.text());
    const reader = r.body!.getReader();
    const dec = new TextDecoder();
    let buf = '';
    const events: Array<{ event: string; data: any; at: number }> = [];
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, i).split('\n');
        buf = buf.slice(i + 2);
        const event = block[0]!.startsWith('event: ') ? block.shift()!.slice(7) : 'message';
        events.push({ event, data: JSON.parse(block[0]!.slice(6)), at: performance.now() - t0 });
      }
    }
    const lines = events.filter((e) => e.event === 'message');
    expect(events.at(-1)!.event).toBe('end');
    expect(lines.map((e) => e.data.lines[0].text)).toEqual(whole.lines.map((l) => l.text));
    expect(lines[0]!.data.lines[0]).toEqual({ text: whole.lines[0]!.text, box: expect.any(Array), confidence: expect.any(Number) });
    const first = lines[0]!.at;
    const last = lines.at(-1)!.at;
    // Detection (once) dominates the first event; each later line costs one recognizer run.
    expect(first).toBeLessThan(last * 0.75);
  }, 120_000);

  it('a plain JSON call gets the lines as an array of per-line replies', async () => {
    const img = await renderText(640, 160, [{ text: 'HELLO 2026', x: 40, y: 100, size: 56 }]);
    const arr = (await (await fn('ocr_stream', img)).json()) as Array<{ lines: Array<{ text: string }> }>;
    expect(arr.map((x) => x.lines[0]!.text)).toEqual(['HELLO 2026']);
  }, 60_000);
});
