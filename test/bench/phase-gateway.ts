// Gateway rows (the gateway is a child process in front of the bundled
// engine): (d) the pipeline through /fn, the small call through /fn (run
// right after its direct counterpart), and one large image staged through
// shm vs forced inline (a second gateway with --shm=false). When the gateway
// does not start, its rows say "not measured: gateway not available".
import { existsSync } from 'node:fs';
import path from 'node:path';
import { makeLargeJpeg } from '../fixtures/images.ts';
import { gatewayImage, gatewayRecommender } from './calls.ts';
import { measure, measureWithCpu, PIPELINE_CLIENTS, SMALL_CLIENTS, skipRows, type BenchContext } from './context.ts';
import { closedLoop } from './load-generator.ts';
import { ROOT } from './processes.ts';
import { startGatewayProc, type EngineProc, type GatewayProc } from './services.ts';

export const GATEWAY_IDS = ['gw-rec', 'gw-rec-c1', 'd', 'large-staged', 'large-inline'];
/** Size asked of the large JPEG (makeLargeJpeg overshoots a little). */
const LARGE_BYTES = 8 * 2 ** 20;

const loop = (ctx: BenchContext, concurrency: number, call: Parameters<typeof closedLoop>[0]['call']) => () =>
  closedLoop({ concurrency, warmupMs: ctx.warmupMs, durationMs: ctx.durationMs, call });

const cpuOf = (gw: GatewayProc, engine: EngineProc): Array<[string, number]> => [
  ['gateway', gw.child.proc.pid!],
  ['engine', engine.child.proc.pid!],
];

/** The default gateway (staging threshold 64 KiB) after one call of each kind; undefined (rows skipped) when it fails. */
export async function startBenchGateway(ctx: BenchContext, engine: EngineProc): Promise<GatewayProc | undefined> {
  if (!existsSync(path.join(ROOT, 'gateway/main.ts'))) {
    skipRows(ctx, 'gateway not available', GATEWAY_IDS);
    return undefined;
  }
  let gw: GatewayProc | undefined;
  try {
    gw = await startGatewayProc('gateway', engine.grpcSocket);
    await gatewayRecommender(gw.port)(0, 0);
    await gatewayImage(gw.port, 'search_pipeline_ensemble', ctx.images)(0, 0);
    return gw;
  } catch (e) {
    await gw?.stop();
    ctx.log(`  gateway failed: ${(e as Error).message}`);
    skipRows(ctx, `gateway not available (${(e as Error).message.split('\n')[0]!.slice(0, 160)})`, GATEWAY_IDS);
    return undefined;
  }
}

/** (d): the image pipeline through POST /fn with a raw image/jpeg body. */
export async function gatewayPipeline(ctx: BenchContext, gw: GatewayProc, engine: EngineProc): Promise<void> {
  const modes = new Set<string>();
  await measureWithCpu(
    ctx,
    'd',
    cpuOf(gw, engine),
    loop(
      ctx,
      PIPELINE_CLIENTS,
      gatewayImage(gw.port, 'search_pipeline_ensemble', ctx.images, (t) => modes.add(t)),
    ),
  );
  const d = ctx.rows.get('d');
  if (d?.result)
    d.note = `${d.note}; raw image/jpeg body (${(ctx.images[0]!.byteLength / 1024).toFixed(0)} KiB), JSON reply; X-Payload-Transfer seen: ${[...modes].join(', ')}`;
}

/** The small call through the gateway: `many` = SMALL_CLIENTS clients, `one` = 1 client. */
export async function gatewayRecommenderRows(
  ctx: BenchContext,
  gw: GatewayProc,
  engine: EngineProc,
  clients: 'many' | 'one',
): Promise<void> {
  if (clients === 'many') await measureWithCpu(ctx, 'gw-rec', cpuOf(gw, engine), loop(ctx, SMALL_CLIENTS, gatewayRecommender(gw.port)));
  else await measure(ctx, 'gw-rec-c1', loop(ctx, 1, gatewayRecommender(gw.port)));
}

/** One large JPEG, 1 client: through `gw` (staged), then through a fresh --shm=false gateway (inline). Stops `gw`. */
export async function largeImageRows(ctx: BenchContext, engine: EngineProc, gw: GatewayProc): Promise<void> {
  ctx.log('gateway: large JPEG staged vs inline');
  let inline: GatewayProc | undefined;
  try {
    const large = [await makeLargeJpeg(LARGE_BYTES)];
    const mib = (large[0]!.byteLength / 2 ** 20).toFixed(1);
    const run = async (id: string, port: number) => {
      const seen = new Set<string>();
      await gatewayImage(port, 'search_pipeline_ensemble', large)(0, 0);
      await measure(
        ctx,
        id,
        loop(
          ctx,
          1,
          gatewayImage(port, 'search_pipeline_ensemble', large, (t) => seen.add(t)),
        ),
      );
      const row = ctx.rows.get(id);
      if (row?.result) row.note = `${mib} MiB JPEG; X-Payload-Transfer: ${[...seen].join(', ')}`;
    };
    await run('large-staged', gw.port);
    await gw.stop();
    inline = await startGatewayProc('gateway-inline', engine.grpcSocket, ['--shm=false']);
    await run('large-inline', inline.port);
  } catch (e) {
    ctx.log(`  gateway (large image) failed: ${(e as Error).message}`);
    skipRows(ctx, `gateway not available (${(e as Error).message.split('\n')[0]!.slice(0, 160)})`, ['large-staged', 'large-inline']);
  } finally {
    await gw.stop();
    await inline?.stop();
  }
}
