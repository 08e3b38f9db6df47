// Phase `--only=gateway`: the small-call rows of the gateway target alone —
// product_recommender_model direct over gRPC and through POST
// /fn/product_recommender, at SMALL_CLIENTS clients and at 1, back to back —
// on an engine that loads only that model. For iterating on the gateway's
// per-call cost without the full engine phase (which measures the same rows
// among all the others, with every model loaded).
import { engineModel, gatewayRecommender, type Channels } from './calls.ts';
import { measure, measureWithCpu, SMALL_CLIENTS, skipRows, type BenchContext } from './context.ts';
import { closedLoop } from './load-generator.ts';
import { BUNDLED_REPO, startEngineProc, startGatewayProc, type EngineProc, type GatewayProc } from './services.ts';

const RECOMMENDER = (c: Channels) => engineModel(c, 'product_recommender_model', 'user_features', [64], 100);
const loop = (ctx: BenchContext, concurrency: number, call: Parameters<typeof closedLoop>[0]['call']) => () =>
  closedLoop({ concurrency, warmupMs: ctx.warmupMs, durationMs: ctx.durationMs, call });

export async function smallGatewayPhase(ctx: BenchContext): Promise<void> {
  ctx.log('gateway small call: direct vs /fn (engine with product_recommender_model only)');
  let engine: EngineProc | undefined;
  let gw: GatewayProc | undefined;
  try {
    engine = await startEngineProc('engine-gw', BUNDLED_REPO, ['--model-control-mode=explicit', '--load-model=product_recommender_model']);
    gw = await startGatewayProc('gateway', engine.grpcSocket);
    await gatewayRecommender(gw.port)(0, 0);
    const cpu: Array<[string, number]> = [
      ['gateway', gw.child.proc.pid!],
      ['engine', engine.child.proc.pid!],
    ];
    await measureWithCpu(
      ctx,
      'rec-batch',
      [['engine', engine.child.proc.pid!]],
      loop(ctx, SMALL_CLIENTS, RECOMMENDER(engine.channels(SMALL_CLIENTS))),
    );
    await measureWithCpu(ctx, 'gw-rec', cpu, loop(ctx, SMALL_CLIENTS, gatewayRecommender(gw.port)));
    await measure(ctx, 'rec-c1-batch', loop(ctx, 1, RECOMMENDER(engine.client)));
    await measure(ctx, 'gw-rec-c1', loop(ctx, 1, gatewayRecommender(gw.port)));
  } catch (e) {
    ctx.log(`  gateway small-call phase failed: ${(e as Error).message}`);
    skipRows(ctx, `not measured: ${(e as Error).message.split('\n')[0]!.slice(0, 160)}`, [
      'rec-batch',
      'gw-rec',
      'rec-c1-batch',
      'gw-rec-c1',
    ]);
  } finally {
    await gw?.stop();
    await engine?.stop();
  }
}
