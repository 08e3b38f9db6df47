// Phase: the OCR pipeline on real PP-OCRv4 weights. An engine child on the
// whole bundled repository (OCR included) and a gateway in front of it;
// rows back to back: the raw ceiling (the two ONNX files run by a plain
// in-process loop, raw-ocr.ts), the engine over gRPC with 1 and with
// OCR_CLIENTS clients, the gateway's /fn/ocr; and the engine's memory with
// the OCR models loaded, next to the engine phase's (without them).
import { renderText } from '../fixtures/text-images.ts';
import { measureWithCpu, skipRows, type BenchContext } from './context.ts';
import { closedLoop, type CallFn } from './load-generator.ts';
import { rssMiB } from './processes.ts';
import { rawOcr } from './raw-ocr.ts';
import { BUNDLED_REPO, post, startEngineProc, startGatewayProc, type EngineProc, type GatewayProc } from './services.ts';
import type { TritonGrpcClient } from '../../client/grpc-client.ts';

/** Closed-loop clients of the OCR rows. */
export const OCR_CLIENTS = 4;
export const OCR_IDS = ['ocr-raw', 'ocr-c1', 'ocr-engine', 'ocr-gw'];

/** Receipt-like images: 800×360 PNGs with 3 lines each, and the lines they hold. */
async function ocrImages(): Promise<Array<{ png: Buffer; lines: string[] }>> {
  const sets = [
    ['Invoice No. 4711-B', 'Total: $1,234.56', 'Due 2026-12-31'],
    ['HELLO 2026', 'Order 88-1203', 'Paid: EUR 99.90'],
    ['Receipt 0042', 'Items: 7', 'Sum 310.25'],
    ['Ticket A-17', 'Gate 12', 'Seat 4C'],
  ];
  return Promise.all(
    sets.map(async (lines) => ({
      lines,
      png: await renderText(
        800,
        360,
        lines.map((text, i) => ({ text, x: 40, y: 90 + i * 110, size: 56 })),
      ),
    })),
  );
}

function checkLines(want: string[], got: string[]): void {
  if (got.join('\n') !== want.join('\n')) throw new Error(`OCR read ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`);
}

function decodeStrings(b: Uint8Array | undefined): string[] {
  const out: string[] = [];
  if (!b) return out;
  const buf = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  for (let at = 0; at < buf.length; at += 4 + buf.readUInt32LE(at))
    out.push(buf.subarray(at + 4, at + 4 + buf.readUInt32LE(at)).toString('utf8'));
  return out;
}

function engineOcr(clients: TritonGrpcClient[], images: Array<{ png: Buffer; lines: string[] }>): CallFn {
  return async (w, seq) => {
    const img = images[seq % images.length]!;
    const res = await clients[w % clients.length]!.modelInfer({
      model_name: 'ocr_pipeline_ensemble',
      inputs: [{ name: 'IMAGE', datatype: 'UINT8', shape: [img.png.byteLength] }],
      raw_input_contents: [img.png],
      outputs: [{ name: 'LINES' }],
    });
    checkLines(img.lines, decodeStrings(res.raw_output_contents[0]));
  };
}

function gatewayOcr(port: number, images: Array<{ png: Buffer; lines: string[] }>): CallFn {
  return async (_w, seq) => {
    const img = images[seq % images.length]!;
    const r = await post(port, '/fn/ocr', img.png, { 'content-type': 'image/png' });
    checkLines(
      img.lines,
      (JSON.parse(r.body.toString('utf8')) as { lines: Array<{ text: string }> }).lines.map((l) => l.text),
    );
  };
}

export async function ocrPhase(ctx: BenchContext): Promise<void> {
  ctx.log('OCR (PP-OCRv4): raw ceiling, engine, gateway, memory');
  const images = await ocrImages();
  // An OCR call takes 0.1-1 s on 2 shared cores: windows long enough for a handful of calls even in --quick.
  const durationMs = ctx.quick ? 2000 : 15_000;
  const warmupMs = ctx.quick ? 500 : ctx.warmupMs;
  const loop = (n: number, call: CallFn) => () => closedLoop({ concurrency: n, warmupMs, durationMs, call });
  let engine: EngineProc | undefined;
  let gw: GatewayProc | undefined;
  try {
    engine = await startEngineProc('engine-ocr', BUNDLED_REPO);
    const c1 = engine.channels(1);
    for (let i = 0; i < 3; i++) await engineOcr(c1, images)(0, i);
    const pid = engine.child.proc.pid!;
    const rss = rssMiB(pid);
    ctx.values.set('memory-engine-ocr', rss);
    ctx.memory.push({
      process: `engine (pid ${pid}) on the whole bundled repository`,
      models: 'all, OCR included (det, rec, 2 JS steps, ensemble), 3 OCR calls',
      rssMiB: rss,
    });
    await measureWithCpu(ctx, 'ocr-raw', [], () =>
      rawOcr(
        BUNDLED_REPO,
        images.map((i) => i.png),
        warmupMs,
        durationMs,
        (lines, i) => checkLines(images[i]!.lines, lines),
      ),
    );
    const cpu: Array<[string, number]> = [['engine', pid]];
    await measureWithCpu(ctx, 'ocr-c1', cpu, loop(1, engineOcr(c1, images)));
    await measureWithCpu(ctx, 'ocr-engine', cpu, loop(OCR_CLIENTS, engineOcr(engine.channels(OCR_CLIENTS), images)));
    gw = await startGatewayProc('gateway-ocr', engine.grpcSocket);
    await gatewayOcr(gw.port, images)(0, 0);
    await measureWithCpu(
      ctx,
      'ocr-gw',
      [
        ['gateway', gw.child.proc.pid!],
        ['engine', pid],
      ],
      loop(OCR_CLIENTS, gatewayOcr(gw.port, images)),
    );
    ctx.memory.push({ process: `engine (pid ${pid}) after the OCR load`, models: 'same', rssMiB: rssMiB(pid) });
  } catch (e) {
    ctx.log(`  OCR phase failed: ${(e as Error).message}`);
    skipRows(ctx, `OCR phase failed: ${(e as Error).message.split('\n')[0]!.slice(0, 160)}`, OCR_IDS);
  } finally {
    await gw?.stop();
    await engine?.stop();
  }
}
