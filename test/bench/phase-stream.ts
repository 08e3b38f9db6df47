// Phase: streaming functions. On an engine child with the OCR models and the
// test's js_count model, a gateway in front: (1) a rendered 20-line page
// through /fn/ocr (one reply) and /fn/ocr_stream (SSE): time to the first
// line and to the last, median of a few calls; (2) 50 slow readers of a
// streaming function that sends several MiB each as fast as it can: the
// gateway's RSS idle, while every reader is stalled, and after, beside what
// the model sent (what an unbounded gateway would hold). Results are notes
// and values of the report; keep it short.
import { cpSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { renderText } from '../fixtures/text-images.ts';
import { writeCountModel } from '../fixtures/stream-models.ts';
import type { BenchContext } from './context.ts';
import { ROOT, rssMiB, trackTempDir } from './processes.ts';
import { BUNDLED_REPO, post, startEngineProc, startGatewayProc, type EngineProc, type GatewayProc } from './services.ts';

const OCR_MODELS = ['ocr_det_model', 'ocr_rec_model', 'ocr_det_preprocess', 'ocr_recognize', 'ocr_pipeline_ensemble', 'ocr_stream'];
const WORDS = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel', 'india', 'juliet'];

function page(): Promise<Buffer> {
  const lines = Array.from({ length: 20 }, (_, i) => ({
    text: `${i + 1} ${WORDS[i % 10]} ${WORDS[(i * 3 + 1) % 10]} ${1000 + i * 37}`,
    x: 30,
    y: 40 + i * 40,
    size: 28,
  }));
  return renderText(700, 840, lines);
}

/** Milliseconds to the first SSE data event and to the end of the stream. */
function sseTimes(port: number, body: Buffer): Promise<{ first: number; total: number; events: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    let first = 0;
    let events = 0;
    const req = http.request(
      {
        port,
        host: '127.0.0.1',
        path: '/fn/ocr_stream',
        method: 'POST',
        headers: { 'content-type': 'image/png', accept: 'text/event-stream' },
      },
      (res) => {
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          const n = d.split('\n\n').filter((b) => b.startsWith('data: ')).length;
          if (n && !first) first = performance.now() - t0;
          events += n;
        });
        res.on('end', () => resolve({ first, total: performance.now() - t0, events }));
      },
    );
    req.once('error', reject);
    req.end(body);
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** `readers` concurrent NDJSON calls that read nothing for `stallMs`, then everything; resolves with the gateway's RSS at the stall's end. */
async function slowReaders(
  port: number,
  pid: number,
  readers: number,
  responses: number,
  pad: number,
  stallMs: number,
): Promise<{ stalledMiB: number; lines: number }> {
  let lines = 0;
  let stalledMiB = 0;
  const body = JSON.stringify({ inputs: { PROMPT: ['slow'], N: [responses], DELAY_MS: [0], PAD_BYTES: [pad], FAIL_AT: [-1] } });
  const reading: Array<() => void> = [];
  const done = Array.from(
    { length: readers },
    () =>
      new Promise<void>((resolve, reject) => {
        const req = http.request(
          {
            port,
            host: '127.0.0.1',
            path: '/fn/count_pad',
            method: 'POST',
            headers: { 'content-type': 'application/json', accept: 'application/x-ndjson' },
          },
          (res) => {
            res.pause();
            reading.push(() => {
              res.on('data', (d: Buffer) => {
                for (const b of d) if (b === 10) lines++;
              });
              res.on('end', () => resolve());
              res.resume();
            });
          },
        );
        req.once('error', reject);
        req.end(body);
      }),
  );
  await new Promise((r) => setTimeout(r, stallMs));
  stalledMiB = rssMiB(pid);
  for (const go of reading) go();
  await Promise.all(done);
  return { stalledMiB, lines };
}

export async function streamPhase(ctx: BenchContext): Promise<void> {
  ctx.log('streaming: /fn/ocr_stream vs /fn/ocr, 50 slow readers');
  let engine: EngineProc | undefined;
  let gw: GatewayProc | undefined;
  const parent = path.join(ROOT, 'node_modules', '.cache', 'tritonish-bench');
  mkdirSync(parent, { recursive: true });
  const repo = trackTempDir(mkdtempSync(path.join(parent, 'stream-')));
  const fnDir = trackTempDir(mkdtempSync(path.join(parent, 'stream-fn-')));
  try {
    for (const m of OCR_MODELS) cpSync(path.join(BUNDLED_REPO, m), path.join(repo, m), { recursive: true });
    writeCountModel(repo);
    for (const f of ['ocr.json', 'ocr_stream.json']) cpSync(path.join(ROOT, 'functions', f), path.join(fnDir, f));
    writeFileSync(
      path.join(fnDir, 'count_pad.json'),
      JSON.stringify({ name: 'count_pad', target: { model: 'js_count' }, outputs: { seq: 'SEQ', pad: 'PAD' } }),
    );
    engine = await startEngineProc('engine-stream', repo);
    gw = await startGatewayProc('gateway-stream', engine.grpcSocket, [`--functions=${fnDir}`]);
    const png = await page();
    const runs = ctx.quick ? 2 : 5;
    const whole: number[] = [];
    const first: number[] = [];
    const total: number[] = [];
    await post(gw.port, '/fn/ocr', png, { 'content-type': 'image/png' }); // warm both paths
    await sseTimes(gw.port, png);
    for (let i = 0; i < runs; i++) {
      const t0 = performance.now();
      const r = await post(gw.port, '/fn/ocr', png, { 'content-type': 'image/png' });
      whole.push(performance.now() - t0);
      if ((JSON.parse(r.body.toString('utf8')) as { lines: unknown[] }).lines.length !== 20)
        throw new Error('/fn/ocr did not read 20 lines');
      const s = await sseTimes(gw.port, png);
      if (s.events !== 20) throw new Error(`/fn/ocr_stream sent ${s.events} lines, not 20`);
      first.push(s.first);
      total.push(s.total);
    }
    ctx.values.set('stream-ocr-ms', median(whole));
    ctx.values.set('stream-ocr-stream-first-ms', median(first));
    ctx.values.set('stream-ocr-stream-total-ms', median(total));
    ctx.notes.push(
      `streaming OCR, a rendered 20-line page 700×840, median of ${runs}: /fn/ocr answers all lines after ${median(whole).toFixed(0)} ms; ` +
        `/fn/ocr_stream sends its first line after ${median(first).toFixed(0)} ms and its last after ${median(total).toFixed(0)} ms ` +
        '(detection once, then one recognizer run per line; /fn/ocr batches the recognizer runs)',
    );
    const readers = 50;
    const responses = ctx.quick ? 16 : 96;
    const pad = 64 * 1024;
    const pid = gw.child.proc.pid!;
    const idle = rssMiB(pid);
    const slow = await slowReaders(gw.port, pid, readers, responses, pad, ctx.quick ? 1500 : 3000);
    if (slow.lines !== readers * responses) throw new Error(`slow readers got ${slow.lines} lines, not ${readers * responses}`);
    const sentMiB = (readers * responses * pad) / 2 ** 20;
    ctx.values.set('stream-gateway-idle-mib', idle);
    ctx.values.set('stream-gateway-stalled-mib', slow.stalledMiB);
    ctx.notes.push(
      `${readers} slow readers of a streaming function (each stalled, then reading ${responses} responses of 64 KiB; ${sentMiB.toFixed(0)} MiB sent by the model in all): ` +
        `gateway RSS ${idle.toFixed(0)} MiB idle, ${slow.stalledMiB.toFixed(0)} MiB with every reader stalled, ${rssMiB(pid).toFixed(0)} MiB after; ` +
        'the gateway pauses each engine stream past 256 KiB waiting (gateway/calls/function-stream.ts), and grpc-js holds up to 16 messages more per stream',
    );
  } catch (e) {
    ctx.log(`  streaming phase failed: ${(e as Error).message}`);
    ctx.notes.push(`streaming phase failed: ${(e as Error).message.split('\n')[0]!.slice(0, 160)}`);
  } finally {
    await gw?.stop();
    await engine?.stop();
  }
}
