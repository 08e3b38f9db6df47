// Phases on the engine (a child process): (b) and the batching-off rows on a
// repository copy without dynamic_batching, then (c), the encoder, the
// preprocess-alone and the recommender rows on the bundled repository, with
// the gateway phase run against that same engine.
import type { TritonGrpcClient } from '../../client/grpc-client.ts';
import { createSharedMemoryRegion, destroySharedMemoryRegion } from '../../client/shared-memory.ts';
import { openLoopRate } from './phase-baseline.ts';
import { engineEnsemble, engineModel, engineModelShm, enginePreprocess, fp32Bytes } from './calls.ts';
import { ENCODER_CLIENTS, measure, PIPELINE_CLIENTS, SMALL_CLIENTS, skipRows, type BenchContext } from './context.ts';
import { closedLoop, openLoop, type CallFn } from './load-generator.ts';
import { rssMiB } from './processes.ts';
import { BUNDLED_REPO, removeDir, startEngineProc, unbatchedRepository, type EngineProc } from './services.ts';

const ENCODER = (c: TritonGrpcClient) => engineModel(c, 'clip_encoder_model', 'pixel_values', [3, 224, 224], 512);
const RECOMMENDER = (c: TritonGrpcClient) => engineModel(c, 'product_recommender_model', 'user_features', [64], 100);

/**
 * Warm every model: `concurrent` false = two sequential calls each (batch 1,
 * like the per-model servers of the memory table); true = 4 calls at once,
 * twice, so every instance of a 2-instance model runs.
 */
export async function warmEngine(client: TritonGrpcClient, images: Buffer[], concurrent: boolean): Promise<void> {
  const img = images[0]!;
  const raw = (model: string, name: string) => client.modelInfer({ model_name: model, inputs: [{ name, datatype: 'UINT8', shape: [img.byteLength] }], raw_input_contents: [img] });
  const calls = (k: number) => [
    () => ENCODER(client)(0, k),
    () => RECOMMENDER(client)(0, k),
    () => engineModel(client, 'harmful_filter_model', 'pixel_values', [3, 224, 224], 2)(0, k),
    () => raw('image_preprocess_model', 'image_bytes'),
    () => raw('search_pipeline_ensemble', 'RAW_IMAGE'),
    () => raw('moderated_search_ensemble', 'RAW_IMAGE'),
  ];
  for (let round = 0; round < 2; round++) {
    if (concurrent) await Promise.all([0, 1, 2, 3].flatMap((k) => calls(k).map((f) => f())));
    else for (const f of calls(round)) await f();
  }
}

const loop = (ctx: BenchContext, concurrency: number, call: CallFn) => () => closedLoop({ concurrency, warmupMs: ctx.warmupMs, durationMs: ctx.durationMs, call });

/** The encoder with each client's input in its own slot of one registered shm region (filled once). */
async function encoderViaShm(ctx: BenchContext, client: TritonGrpcClient) {
  const slot = 3 * 224 * 224 * 4;
  const name = `bench_encoder_${process.pid}`;
  const region = createSharedMemoryRegion(name, `/${name}`, slot * ENCODER_CLIENTS, { touch: true, exclusive: true });
  try {
    const sample = fp32Bytes(slot / 4);
    for (let w = 0; w < ENCODER_CLIENTS; w++) region.bytes.set(sample, w * slot);
    await client.systemSharedMemoryRegister(name, region.key, region.byteSize);
    try {
      const call = engineModelShm(client, 'clip_encoder_model', 'pixel_values', [3, 224, 224], 512, name);
      return await closedLoop({ concurrency: ENCODER_CLIENTS, warmupMs: ctx.warmupMs, durationMs: ctx.durationMs, call });
    } finally {
      await client.systemSharedMemoryUnregister(name);
    }
  } finally {
    destroySharedMemoryRegion(region);
  }
}

export async function unbatchedEnginePhase(ctx: BenchContext): Promise<void> {
  ctx.log('(b) engine with batching off');
  const ids = ['b', 'enc-nobatch', 'rec-nobatch', 'rec-c1-engine'];
  const repo = unbatchedRepository(['clip_encoder_model', 'harmful_filter_model', 'product_recommender_model']);
  let engine: EngineProc | undefined;
  try {
    engine = await startEngineProc('engine-nobatch', repo);
    const c = engine.client;
    await warmEngine(c, ctx.images, true);
    await measure(ctx, 'b', loop(ctx, PIPELINE_CLIENTS, engineEnsemble(c, ctx.images)));
    await measure(ctx, 'enc-nobatch', loop(ctx, ENCODER_CLIENTS, ENCODER(c)));
    await measure(ctx, 'rec-nobatch', loop(ctx, SMALL_CLIENTS, RECOMMENDER(c)));
    await measure(ctx, 'rec-c1-engine', loop(ctx, 1, RECOMMENDER(c)), 'no batching, so no queue delay: the request path alone');
  } catch (e) {
    ctx.log(`  engine (batching off) failed: ${(e as Error).message}`);
    skipRows(ctx, `engine failed: ${(e as Error).message.split('\n')[0]}`, ids);
  } finally {
    await engine?.stop();
    removeDir(repo);
  }
}

/** The bundled engine: memory after warm-up, (c), its open loop, encoder, preprocess alone; then `more(engine)`. */
export async function batchedEnginePhase(ctx: BenchContext, more: (engine: EngineProc) => Promise<void>): Promise<void> {
  ctx.log('(c) engine with dynamic batching (bundled repository)');
  const ids = ['c', 'ol-c', 'enc-batch', 'enc-shm', 'pre-alone', 'rec-batch', 'rec-c1-batch'];
  let engine: EngineProc | undefined;
  try {
    engine = await startEngineProc('engine', BUNDLED_REPO);
    const c = engine.client;
    await warmEngine(c, ctx.images, false);
    const pid = engine.child.proc.pid!;
    const rss = rssMiB(pid);
    await warmEngine(c, ctx.images, true);
    ctx.values.set('memory-engine', rss);
    ctx.memory.push({ process: `engine (pid ${pid})`, models: 'all 6 (encoder ×2 instances, preprocess ×2, harmful, recommender, 2 ensembles), 2 sequential calls each', rssMiB: rss });
    const pipeline = engineEnsemble(c, ctx.images);
    await measure(ctx, 'c', loop(ctx, PIPELINE_CLIENTS, pipeline));
    const rate = openLoopRate(ctx);
    if (rate) await measure(ctx, 'ol-c', () => openLoop({ rate, warmupMs: ctx.warmupMs, durationMs: ctx.durationMs, call: pipeline }), undefined, `${rate} req/s`);
    else skipRows(ctx, 'no (a) throughput to set the rate', ['ol-c']);
    await measure(ctx, 'enc-batch', loop(ctx, ENCODER_CLIENTS, ENCODER(c)));
    await measure(ctx, 'enc-shm', () => encoderViaShm(ctx, c));
    await measure(ctx, 'pre-alone', loop(ctx, PIPELINE_CLIENTS, enginePreprocess(c, ctx.images)));
    await measure(ctx, 'rec-batch', loop(ctx, SMALL_CLIENTS, RECOMMENDER(c)));
    await measure(ctx, 'rec-c1-batch', loop(ctx, 1, RECOMMENDER(c)));
    await more(engine);
    ctx.memory.push({ process: `engine (pid ${pid}) after the whole load`, models: 'same (for reference: heap and buffers grown under load)', rssMiB: rssMiB(pid) });
  } catch (e) {
    ctx.log(`  engine (batching) failed: ${(e as Error).message}`);
    skipRows(ctx, `engine failed: ${(e as Error).message.split('\n')[0]}`, ids);
  } finally {
    await engine?.stop();
  }
}
