// One call of each kind the bench measures, as a load-generator CallFn.
// Every call checks its answer's shape, so a broken path fails loudly
// instead of being timed.
import type { TritonGrpcClient } from '../../client/grpc-client.ts';
import type { CallFn } from './load-generator.ts';
import { BENCH_API_KEY, post } from './services.ts';

const EMBED = 512;
const PIXELS = 3 * 224 * 224;

/**
 * The gRPC clients of a load row: client `w` of the load generator uses
 * channel w mod n, so N clients are N connections (like N client processes),
 * or all share one when given one.
 */
export type Channels = TritonGrpcClient | TritonGrpcClient[];
const pick = (c: Channels, w: number): TritonGrpcClient => (Array.isArray(c) ? c[w % c.length]! : c);

function expectLength(what: string, got: number, want: number): void {
  if (got !== want) throw new Error(`${what}: expected ${want} values, got ${got}`);
}

/** (a) the client calls the preprocess server, then the encoder server, tensors as JSON. */
export function baselinePipeline(prePort: number, encPort: number, images: Buffer[]): CallFn {
  return async (_w, seq) => {
    const pre = await post(prePort, '/infer', images[seq % images.length]!, { 'content-type': 'image/jpeg' });
    // What a client of a JSON model server does: parse the reply, send its tensor on.
    const tensor = (JSON.parse(pre.body.toString('utf8')) as { outputs: Array<{ data: number[] }> }).outputs[0]!;
    expectLength('baseline preprocess', tensor.data.length, PIXELS);
    const body = JSON.stringify({ inputs: [{ name: 'pixel_values', shape: [1, 3, 224, 224], datatype: 'FP32', data: tensor.data }] });
    const enc = await post(encPort, '/infer', body, { 'content-type': 'application/json' });
    const out = (JSON.parse(enc.body.toString('utf8')) as { outputs: Array<{ data: number[] }> }).outputs[0]!;
    expectLength('baseline encoder', out.data.length, EMBED);
  };
}

/** JPEG in, FINAL_VECTOR out, through an ensemble over gRPC. */
export function engineEnsemble(client: Channels, images: Buffer[], model = 'search_pipeline_ensemble'): CallFn {
  return async (w, seq) => {
    const img = images[seq % images.length]!;
    const res = await pick(client, w).modelInfer({
      model_name: model,
      inputs: [{ name: 'RAW_IMAGE', datatype: 'UINT8', shape: [img.byteLength] }],
      raw_input_contents: [img],
    });
    expectLength(model, (res.raw_output_contents[0]?.byteLength ?? 0) / 4, EMBED);
  };
}

/** image_preprocess_model alone over gRPC. */
export function enginePreprocess(client: Channels, images: Buffer[]): CallFn {
  return async (w, seq) => {
    const img = images[seq % images.length]!;
    const res = await pick(client, w).modelInfer({
      model_name: 'image_preprocess_model',
      inputs: [{ name: 'image_bytes', datatype: 'UINT8', shape: [img.byteLength] }],
      raw_input_contents: [img],
    });
    expectLength('image_preprocess_model', (res.raw_output_contents[0]?.byteLength ?? 0) / 4, PIXELS);
  };
}

/** A deterministic FP32 tensor's bytes. */
export function fp32Bytes(count: number, seed = 1): Buffer {
  const f = new Float32Array(count);
  for (let i = 0; i < count; i++) f[i] = Math.sin(i * 0.1 + seed);
  return Buffer.from(f.buffer);
}

/** A batch-1 FP32 call of an ONNX model over gRPC with raw bytes. */
export function engineModel(client: Channels, model: string, input: string, sampleShape: number[], outputValues: number): CallFn {
  const count = sampleShape.reduce((a, b) => a * b, 1);
  const bytes = fp32Bytes(count);
  return async (w) => {
    const res = await pick(client, w).modelInfer({
      model_name: model,
      inputs: [{ name: input, datatype: 'FP32', shape: [1, ...sampleShape] }],
      raw_input_contents: [bytes],
    });
    expectLength(model, (res.raw_output_contents[0]?.byteLength ?? 0) / 4, outputValues);
  };
}

/**
 * A batch-1 FP32 call whose input sits in a registered shm region: client
 * `w` uses the slot at offset w × slotBytes (the slots are filled once).
 */
export function engineModelShm(
  client: Channels,
  model: string,
  input: string,
  sampleShape: number[],
  outputValues: number,
  region: string,
): CallFn {
  const slotBytes = sampleShape.reduce((a, b) => a * b, 4);
  return async (w) => {
    const res = await pick(client, w).modelInfer({
      model_name: model,
      inputs: [
        {
          name: input,
          datatype: 'FP32',
          shape: [1, ...sampleShape],
          parameters: {
            shared_memory_region: { string_param: region },
            shared_memory_offset: { int64_param: w * slotBytes },
            shared_memory_byte_size: { int64_param: slotBytes },
          },
        },
      ],
    });
    expectLength(model, (res.raw_output_contents[0]?.byteLength ?? 0) / 4, outputValues);
  };
}

/** POST /fn/<name> with a raw image body; `onReply` sees the X-Payload-Transfer header. */
export function gatewayImage(port: number, fn: string, images: Buffer[], onReply?: (transfer: string) => void): CallFn {
  return async (_w, seq) => {
    const r = await post(port, `/fn/${fn}`, images[seq % images.length]!, { 'content-type': 'image/jpeg' });
    const out = (JSON.parse(r.body.toString('utf8')) as { outputs: Record<string, { data: number[] }> }).outputs;
    const first = Object.values(out)[0];
    expectLength(`/fn/${fn}`, first?.data.length ?? 0, EMBED);
    onReply?.(String(r.headers['x-payload-transfer'] ?? '?'));
  };
}

/** POST /fn/product_recommender with one row of 64 features as JSON. */
export function gatewayRecommender(port: number): CallFn {
  const features = Array.from({ length: 64 }, (_, i) => Math.sin(i * 0.1 + 1));
  const body = JSON.stringify({ inputs: { user_features: { data: features, shape: [1, 64] } } });
  return async () => {
    const r = await post(port, '/fn/product_recommender', body, { 'content-type': 'application/json', 'x-api-key': BENCH_API_KEY });
    const scores = (JSON.parse(r.body.toString('utf8')) as { outputs: Record<string, { data: number[] }> }).outputs.scores;
    expectLength('/fn/product_recommender', scores?.data.length ?? 0, 100);
  };
}

/** A JSON request for a baseline onnx server: one zero-ish FP32 input (for warming it). */
export function baselineOnnxBody(input: string, sampleShape: number[]): string {
  const count = sampleShape.reduce((a, b) => a * b, 1);
  const data = Array.from({ length: count }, (_, i) => Math.sin(i * 0.1));
  return JSON.stringify({ inputs: [{ name: input, shape: [1, ...sampleShape], datatype: 'FP32', data }] });
}
