// Phase: (a) the baseline — a preprocess server and an encoder server, one
// process each, tensors as JSON; the client calls one then the other.
import { modelPath } from '../../model_repository/build-models.ts';
import { baselinePipeline } from './calls.ts';
import { measure, measureWithCpu, PIPELINE_CLIENTS, skipRows, type BenchContext } from './context.ts';
import { closedLoop, openLoop } from './load-generator.ts';
import { BUNDLED_REPO, startBaselineServer, type BaselineProc } from './services.ts';

/** Arrival rate of the open-loop rows: half of (a)'s closed-loop throughput (both (a) and (c) are run at it). */
export function openLoopRate(ctx: BenchContext): number | undefined {
  const a = ctx.rows.get('a')?.result?.throughput;
  return a && a > 0 ? Math.max(1, Math.round(a * 0.5)) : undefined;
}

export async function baselinePhase(ctx: BenchContext): Promise<void> {
  ctx.log('(a) baseline: one HTTP server process per model');
  const started: BaselineProc[] = [];
  try {
    const [pre, enc] = await Promise.all([
      startBaselineServer('baseline-preprocess', ['--kind=preprocess']),
      startBaselineServer('baseline-encoder', ['--kind=onnx', `--model=${modelPath(BUNDLED_REPO, 'clip_encoder_model')}`, '--intra-op=2']),
    ]);
    started.push(pre, enc);
    const call = baselinePipeline(pre.port, enc.port, ctx.images);
    const cpu: Array<[string, number]> = [
      ['preprocess server', pre.child.proc.pid!],
      ['encoder server', enc.child.proc.pid!],
    ];
    await measureWithCpu(
      ctx,
      'a',
      cpu,
      () => closedLoop({ concurrency: PIPELINE_CLIENTS, warmupMs: ctx.warmupMs, durationMs: ctx.durationMs, call }),
      'encoder server: one onnxruntime-node session, intra-op 2 threads, no spinning; client parses the preprocess reply and re-sends the tensor as JSON',
    );
    const rate = openLoopRate(ctx);
    if (rate) {
      await measure(
        ctx,
        'ol-a',
        () => openLoop({ rate, warmupMs: ctx.warmupMs, durationMs: ctx.durationMs, call }),
        undefined,
        `${rate} req/s`,
      );
    }
  } catch (e) {
    ctx.log(`  baseline failed: ${(e as Error).message}`);
    skipRows(ctx, `baseline servers failed: ${(e as Error).message.split('\n')[0]}`, ['a', 'ol-a']);
  } finally {
    await Promise.all(started.map((s) => s.stop()));
  }
  skipRows(ctx, 'no (a) throughput to set the rate', ['ol-a']);
}
