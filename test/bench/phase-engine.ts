// Phase on the engine: two engine child processes side by side — the bundled
// repository (dynamic batching) and a copy with batching off — plus the
// gateway in front of the first. Rows that are compared run back to back
// ((b)/(c)/(d)/preprocess alone; ceiling/encoder; recommender with/without
// batching, direct/gateway) so load from other processes on the host hits
// both sides of a ratio alike. Idle engines cost next to no CPU.
import type { TritonGrpcClient } from '../../client/grpc-client.ts';
import { createSharedMemoryRegion, destroySharedMemoryRegion } from '../../client/shared-memory.ts';
import { modelPath } from '../../model_repository/build-models.ts';
import { openLoopRate } from './phase-baseline.ts';
import { gatewayPipeline, gatewayRecommenderRows, largeImageRows, startBenchGateway, GATEWAY_IDS } from './phase-gateway.ts';
import { engineEnsemble, engineModel, engineModelShm, enginePreprocess, fp32Bytes, type Channels } from './calls.ts';
import { ENCODER_CLIENTS, measure, measureWithCpu, PIPELINE_CLIENTS, SMALL_CLIENTS, skipRows, type BenchContext } from './context.ts';
import { closedLoop, openLoop, type CallFn } from './load-generator.ts';
import { rssMiB } from './processes.ts';
import { rawCeiling, rawSessionLatency } from './raw-ort.ts';
import { BUNDLED_REPO, removeDir, startEngineProc, unbatchedRepository, type EngineProc, type GatewayProc } from './services.ts';

const ENCODER = (c: Channels) => engineModel(c, 'clip_encoder_model', 'pixel_values', [3, 224, 224], 512);
const RECOMMENDER = (c: Channels) => engineModel(c, 'product_recommender_model', 'user_features', [64], 100);
/** The models of this phase's engines (the OCR models are left to phase-ocr.ts). */
const IMAGE_MODELS = [
  'image_preprocess_model',
  'clip_encoder_model',
  'harmful_filter_model',
  'product_recommender_model',
  'search_pipeline_ensemble',
  'moderated_search_ensemble',
];
const ENGINE_IDS = [
  'b',
  'c',
  'pre-alone',
  'ol-c',
  'ceiling',
  'enc-batch',
  'enc-shm',
  'enc-nobatch',
  'rec-nobatch',
  'rec-batch',
  'rec-c1-batch',
  'rec-c1-engine',
  'rec-c1-raw',
];

/**
 * Warm every model: `concurrent` false = two sequential calls each (batch 1,
 * like the per-model servers of the memory table); true = 4 calls at once,
 * twice, so every instance of a 2-instance model runs.
 */
export async function warmEngine(client: TritonGrpcClient, images: Buffer[], concurrent: boolean): Promise<void> {
  const img = images[0]!;
  const raw = (model: string, name: string) =>
    client.modelInfer({ model_name: model, inputs: [{ name, datatype: 'UINT8', shape: [img.byteLength] }], raw_input_contents: [img] });
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

export const loop = (ctx: BenchContext, concurrency: number, call: CallFn) => () =>
  closedLoop({ concurrency, warmupMs: ctx.warmupMs, durationMs: ctx.durationMs, call });

/** The encoder with each client's input in its own slot of one registered shm region (filled once). */
async function encoderViaShm(ctx: BenchContext, engine: EngineProc) {
  const client = engine.client;
  const slot = 3 * 224 * 224 * 4;
  const name = `bench_encoder_${process.pid}`;
  const region = createSharedMemoryRegion(name, `/${name}`, slot * ENCODER_CLIENTS, { touch: true, exclusive: true });
  try {
    const sample = fp32Bytes(slot / 4);
    for (let w = 0; w < ENCODER_CLIENTS; w++) region.bytes.set(sample, w * slot);
    await client.systemSharedMemoryRegister(name, region.key, region.byteSize);
    try {
      const call = engineModelShm(engine.channels(ENCODER_CLIENTS), 'clip_encoder_model', 'pixel_values', [3, 224, 224], 512, name);
      return await closedLoop({ concurrency: ENCODER_CLIENTS, warmupMs: ctx.warmupMs, durationMs: ctx.durationMs, call });
    } finally {
      await client.systemSharedMemoryUnregister(name);
    }
  } finally {
    destroySharedMemoryRegion(region);
  }
}

async function pipelineRows(ctx: BenchContext, nobatch: EngineProc, engine: EngineProc, gw: GatewayProc | undefined): Promise<void> {
  ctx.log('image pipeline: (b), (c), (d), preprocess alone');
  await measureWithCpu(
    ctx,
    'b',
    [['engine', nobatch.child.proc.pid!]],
    loop(ctx, PIPELINE_CLIENTS, engineEnsemble(nobatch.channels(PIPELINE_CLIENTS), ctx.images)),
  );
  const pipeline = engineEnsemble(engine.channels(PIPELINE_CLIENTS), ctx.images);
  const cpu: Array<[string, number]> = [['engine', engine.child.proc.pid!]];
  await measureWithCpu(ctx, 'c', cpu, loop(ctx, PIPELINE_CLIENTS, pipeline));
  if (gw) await gatewayPipeline(ctx, gw, engine);
  await measureWithCpu(ctx, 'pre-alone', cpu, loop(ctx, PIPELINE_CLIENTS, enginePreprocess(engine.channels(PIPELINE_CLIENTS), ctx.images)));
  const rate = openLoopRate(ctx);
  if (rate)
    await measure(
      ctx,
      'ol-c',
      () => openLoop({ rate, warmupMs: ctx.warmupMs, durationMs: ctx.durationMs, call: pipeline }),
      undefined,
      `${rate} req/s`,
    );
  else skipRows(ctx, 'no (a) throughput to set the rate', ['ol-c']);
}

async function encoderRows(ctx: BenchContext, nobatch: EngineProc, engine: EngineProc): Promise<void> {
  ctx.log('encoder: raw ceiling, engine with batching (gRPC bytes, shm), without');
  await measure(
    ctx,
    'ceiling',
    () =>
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
  const cpu: Array<[string, number]> = [['engine', engine.child.proc.pid!]];
  await measureWithCpu(ctx, 'enc-batch', cpu, loop(ctx, ENCODER_CLIENTS, ENCODER(engine.channels(ENCODER_CLIENTS))));
  await measureWithCpu(ctx, 'enc-shm', cpu, () => encoderViaShm(ctx, engine));
  await measureWithCpu(
    ctx,
    'enc-nobatch',
    [['engine', nobatch.child.proc.pid!]],
    loop(ctx, ENCODER_CLIENTS, ENCODER(nobatch.channels(ENCODER_CLIENTS))),
  );
}

async function recommenderRows(ctx: BenchContext, nobatch: EngineProc, engine: EngineProc, gw: GatewayProc | undefined): Promise<void> {
  ctx.log('recommender: with/without batching, direct/gateway, per-request overhead');
  await measureWithCpu(
    ctx,
    'rec-nobatch',
    [['engine', nobatch.child.proc.pid!]],
    loop(ctx, SMALL_CLIENTS, RECOMMENDER(nobatch.channels(SMALL_CLIENTS))),
  );
  await measureWithCpu(
    ctx,
    'rec-batch',
    [['engine', engine.child.proc.pid!]],
    loop(ctx, SMALL_CLIENTS, RECOMMENDER(engine.channels(SMALL_CLIENTS))),
  );
  if (gw) await gatewayRecommenderRows(ctx, gw, engine, 'many');
  await measure(ctx, 'rec-c1-batch', loop(ctx, 1, RECOMMENDER(engine.client)));
  if (gw) await gatewayRecommenderRows(ctx, gw, engine, 'one');
  await measure(ctx, 'rec-c1-engine', loop(ctx, 1, RECOMMENDER(nobatch.client)), 'no batching, so no queue delay: the request path alone');
  await measure(ctx, 'rec-c1-raw', () =>
    rawSessionLatency(
      modelPath(BUNDLED_REPO, 'product_recommender_model'),
      'user_features',
      [64],
      ctx.quick ? 200 : 1000,
      ctx.quick ? 1000 : 5000,
    ),
  );
}

export async function enginePhase(ctx: BenchContext): Promise<void> {
  ctx.log('engines: bundled repository (dynamic batching) and a copy with batching off');
  const repo = unbatchedRepository(['clip_encoder_model', 'harmful_filter_model', 'product_recommender_model']);
  const engines: EngineProc[] = [];
  let gw: GatewayProc | undefined;
  try {
    // The OCR models have their own phase (phase-ocr.ts): these engines load the image and recommender models only.
    const only = ['--model-control-mode=explicit', ...IMAGE_MODELS.map((m) => `--load-model=${m}`)];
    // Both start at once; when one fails, the other is still stopped in `finally`.
    const started = await Promise.allSettled([
      startEngineProc('engine', BUNDLED_REPO, only),
      startEngineProc('engine-nobatch', repo, only),
    ]);
    for (const r of started) if (r.status === 'fulfilled') engines.push(r.value);
    const failed = started.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    const [engine, nobatch] = engines as [EngineProc, EngineProc];
    await warmEngine(engine.client, ctx.images, false);
    const pid = engine.child.proc.pid!;
    const rss = rssMiB(pid);
    ctx.values.set('memory-engine', rss);
    ctx.memory.push({
      process: `engine (pid ${pid})`,
      models: 'all 6 (encoder ×2 instances, preprocess ×2, harmful, recommender, 2 ensembles), 2 sequential calls each',
      rssMiB: rss,
    });
    await warmEngine(engine.client, ctx.images, true);
    await warmEngine(nobatch.client, ctx.images, true);
    gw = await startBenchGateway(ctx, engine);
    await pipelineRows(ctx, nobatch, engine, gw);
    await encoderRows(ctx, nobatch, engine);
    await recommenderRows(ctx, nobatch, engine, gw);
    if (gw) {
      await largeImageRows(ctx, engine, gw);
      gw = undefined;
    }
    ctx.memory.push({
      process: `engine (pid ${pid}) after the whole load`,
      models: 'same (for reference: heap and buffers grown under load)',
      rssMiB: rssMiB(pid),
    });
  } catch (e) {
    ctx.log(`  engine phase failed: ${(e as Error).message}`);
    // First line and the child's last output line (its error), so the report says why.
    const lines = (e as Error).message
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean);
    const why = `engine failed: ${lines[0]}${lines.length > 1 ? ` … ${lines[lines.length - 1]!.slice(0, 200)}` : ''}`;
    skipRows(ctx, why, ENGINE_IDS);
    skipRows(ctx, why, GATEWAY_IDS);
  } finally {
    await gw?.stop();
    await Promise.all(engines.map((e) => e.stop()));
    removeDir(repo);
  }
}
