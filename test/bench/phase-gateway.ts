// Phase: the gateway (a child process) in front of the bundled engine —
// (d) the pipeline through /fn, a small call through /fn vs direct gRPC
// (run right after the direct row), and one large image staged through shm
// vs forced inline. Rows say "not measured: gateway not available" when
// the gateway does not start.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { makeLargeJpeg } from '../fixtures/images.ts';
import { gatewayImage, gatewayRecommender } from './calls.ts';
import { measure, PIPELINE_CLIENTS, SMALL_CLIENTS, skipRows, type BenchContext } from './context.ts';
import { closedLoop } from './load-generator.ts';
import { ROOT } from './processes.ts';
import { startGatewayProc, type EngineProc, type GatewayProc } from './services.ts';

const IDS = ['gw-rec', 'gw-rec-c1', 'd', 'large-staged', 'large-inline'];
/** Size asked of the large JPEG (makeLargeJpeg overshoots a little). */
const LARGE_BYTES = 8 * 2 ** 20;

export async function gatewayPhase(ctx: BenchContext, engine: EngineProc): Promise<void> {
  ctx.log('gateway in front of the engine');
  if (!existsSync(path.join(ROOT, 'gateway/main.ts'))) {
    skipRows(ctx, 'gateway not available', IDS);
    return;
  }
  const started: GatewayProc[] = [];
  try {
    const gw = await startGatewayProc('gateway', engine.grpcPort);
    started.push(gw);
    await gatewayRecommender(gw.port)(0, 0);
    await measure(ctx, 'gw-rec', () => closedLoop({ concurrency: SMALL_CLIENTS, warmupMs: ctx.warmupMs, durationMs: ctx.durationMs, call: gatewayRecommender(gw.port) }));
    await measure(ctx, 'gw-rec-c1', () => closedLoop({ concurrency: 1, warmupMs: ctx.warmupMs, durationMs: ctx.durationMs, call: gatewayRecommender(gw.port) }));
    const modes = new Set<string>();
    await measure(ctx, 'd', () =>
      closedLoop({ concurrency: PIPELINE_CLIENTS, warmupMs: ctx.warmupMs, durationMs: ctx.durationMs, call: gatewayImage(gw.port, 'search_pipeline_ensemble', ctx.images, (t) => modes.add(t)) }),
    );
    const d = ctx.rows.get('d');
    if (d?.result) d.note = `raw image/jpeg body (${(ctx.images[0]!.byteLength / 1024).toFixed(0)} KiB), JSON reply; X-Payload-Transfer seen: ${[...modes].join(', ')}`;

    const large = [await makeLargeJpeg(LARGE_BYTES)];
    const mib = (large[0]!.byteLength / 2 ** 20).toFixed(1);
    const staged = new Set<string>();
    await gatewayImage(gw.port, 'search_pipeline_ensemble', large)(0, 0);
    await measure(ctx, 'large-staged', () =>
      closedLoop({ concurrency: 1, warmupMs: ctx.warmupMs, durationMs: ctx.durationMs, call: gatewayImage(gw.port, 'search_pipeline_ensemble', large, (t) => staged.add(t)) }),
    );
    const stagedRow = ctx.rows.get('large-staged');
    if (stagedRow?.result) stagedRow.note = `${mib} MiB JPEG; X-Payload-Transfer: ${[...staged].join(', ')}`;
    await gw.stop();
    started.pop();

    const inline = await startGatewayProc('gateway-inline', engine.grpcPort, ['--shm=false']);
    started.push(inline);
    const seen = new Set<string>();
    await gatewayImage(inline.port, 'search_pipeline_ensemble', large)(0, 0);
    await measure(ctx, 'large-inline', () =>
      closedLoop({ concurrency: 1, warmupMs: ctx.warmupMs, durationMs: ctx.durationMs, call: gatewayImage(inline.port, 'search_pipeline_ensemble', large, (t) => seen.add(t)) }),
    );
    const row = ctx.rows.get('large-inline');
    if (row?.result) row.note = `${mib} MiB JPEG; X-Payload-Transfer: ${[...seen].join(', ')}`;
  } catch (e) {
    ctx.log(`  gateway failed: ${(e as Error).message}`);
    skipRows(ctx, `gateway not available (${(e as Error).message.split('\n')[0]!.slice(0, 120)})`, IDS);
  } finally {
    await Promise.all(started.map((g) => g.stop()));
  }
}
