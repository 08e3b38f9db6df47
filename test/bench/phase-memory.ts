// Phase: resident memory of one process per model — each a baseline model
// server holding one model (one ONNX session, or sharp for preprocessing),
// warmed with two requests — to set against the engine's VmRSS with every
// model loaded and warmed (taken in the engine phase).
import { modelPath } from '../../model_repository/build-models.ts';
import { baselineOnnxBody } from './calls.ts';
import type { BenchContext } from './context.ts';
import { rssMiB } from './processes.ts';
import { BUNDLED_REPO, post, startBaselineServer, type BaselineProc } from './services.ts';

const ONNX_MODELS: Array<[model: string, input: string, shape: number[]]> = [
  ['clip_encoder_model', 'pixel_values', [3, 224, 224]],
  ['harmful_filter_model', 'pixel_values', [3, 224, 224]],
  ['product_recommender_model', 'user_features', [64]],
];

export async function memoryPhase(ctx: BenchContext): Promise<void> {
  ctx.log('resident memory: one process per model');
  const started: BaselineProc[] = [];
  try {
    const servers = await Promise.all([
      startBaselineServer('per-model-image_preprocess_model', ['--kind=preprocess']),
      ...ONNX_MODELS.map(([m]) =>
        startBaselineServer(`per-model-${m}`, ['--kind=onnx', `--model=${modelPath(BUNDLED_REPO, m)}`, '--intra-op=1']),
      ),
    ]);
    started.push(...servers);
    const [pre, ...onnx] = servers;
    for (let i = 0; i < 2; i++) {
      await post(pre!.port, '/infer', ctx.images[i % ctx.images.length]!, { 'content-type': 'image/jpeg' });
      await Promise.all(
        onnx.map((s, k) =>
          post(s.port, '/infer', baselineOnnxBody(ONNX_MODELS[k]![1], ONNX_MODELS[k]![2]), { 'content-type': 'application/json' }),
        ),
      );
    }
    const names = ['image_preprocess_model', ...ONNX_MODELS.map(([m]) => m)];
    let sum = 0;
    servers.forEach((s, i) => {
      const rss = rssMiB(s.child.proc.pid!);
      sum += rss;
      ctx.memory.push({ process: `per-model server (pid ${s.child.proc.pid})`, models: names[i]!, rssMiB: rss });
    });
    ctx.memory.push({ process: 'sum of the per-model servers', models: names.join(', '), rssMiB: sum });
    ctx.values.set('memory-per-model-sum', sum);
    ctx.log(`  per-model processes: ${sum.toFixed(0)} MiB in all`);
  } catch (e) {
    ctx.log(`  memory phase failed: ${(e as Error).message}`);
    ctx.notes.push(`process-per-model memory not measured: ${(e as Error).message.split('\n')[0]}`);
  } finally {
    await Promise.all(started.map((s) => s.stop()));
  }
}
