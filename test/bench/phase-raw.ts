// Phase: raw in-process ONNX Runtime, nothing else running — the encoder's
// throughput ceiling and the recommender's bare session.run latency.
import { modelPath } from '../../model_repository/build-models.ts';
import { measure, type BenchContext } from './context.ts';
import { rawCeiling, rawSessionLatency } from './raw-ort.ts';
import { BUNDLED_REPO } from './services.ts';

export async function rawPhase(ctx: BenchContext): Promise<void> {
  ctx.log('raw ONNX Runtime in-process');
  await measure(ctx, 'ceiling', () =>
    rawCeiling({
      modelPath: modelPath(BUNDLED_REPO, 'clip_encoder_model'),
      inputName: 'pixel_values',
      sampleShape: [3, 224, 224],
      workers: 2,
      batch: 16,
      warmupMs: ctx.warmupMs,
      durationMs: ctx.durationMs,
    }),
    'p50/p95 are per batch-16 run; throughput in images/s',
  );
  await measure(ctx, 'rec-c1-raw', () =>
    rawSessionLatency(modelPath(BUNDLED_REPO, 'product_recommender_model'), 'user_features', [64], ctx.quick ? 200 : 1000, ctx.quick ? 1000 : 5000),
  );
}
