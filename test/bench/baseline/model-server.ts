// The baseline the seed argues against: one small HTTP server process per
// model, tensors as JSON arrays (KServe v2 JSON shapes). Two kinds:
//   --kind=onnx --model=PATH    one onnxruntime-node session run on the main
//                               thread (like a one-worker FastAPI app);
//   --kind=preprocess           the bundled image_preprocess_model's code
//                               (sharp decode/resize/normalize), raw image in.
// Run: node --import tsx test/bench/baseline/model-server.ts --kind=... --port=N
// Routes: GET /health, POST /infer.
// Threading: one process, one event loop; session.run blocks it while it
// runs, so requests to the onnx kind run one at a time.
import http from 'node:http';
import { parseArgs } from 'node:util';
import * as ort from 'onnxruntime-node';
import * as preprocessModel from '../../../model_repository/image_preprocess_model/1/model.ts';

interface JsonTensor {
  name: string;
  shape: number[];
  datatype: string;
  data: number[];
}

const { values } = parseArgs({
  options: {
    kind: { type: 'string' },
    model: { type: 'string' },
    port: { type: 'string' },
    'intra-op': { type: 'string', default: '2' },
  },
});
const kind = values.kind;
const port = Number(values.port ?? 0);

function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    req.on('data', (d: Buffer) => parts.push(d));
    req.on('end', () => resolve(Buffer.concat(parts)));
    req.on('error', reject);
  });
}

function reply(res: http.ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

type Handler = (body: Buffer) => Promise<string>;

async function onnxHandler(modelPath: string): Promise<Handler> {
  // The baseline gets the favourable settings for its single session: all
  // cores for one run (intra-op = --intra-op, Python ORT's default on 2 cores)
  // and no spinning, so idle threads do not steal the other servers' cores.
  const session = await ort.InferenceSession.create(modelPath, {
    intraOpNumThreads: Number(values['intra-op']),
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    executionProviders: ['cpu'],
    extra: { session: { intra_op: { allow_spinning: '0' }, inter_op: { allow_spinning: '0' } } },
  } as ort.InferenceSession.SessionOptions);
  return async (body) => {
    const { inputs } = JSON.parse(body.toString('utf8')) as { inputs: JsonTensor[] };
    const feeds: Record<string, ort.Tensor> = {};
    for (const t of inputs) feeds[t.name] = new ort.Tensor('float32', Float32Array.from(t.data), t.shape);
    const out = await session.run(feeds);
    const outputs = Object.entries(out).map(([name, t]) => ({
      name,
      shape: t.dims,
      datatype: 'FP32',
      data: Array.from(t.data as Float32Array),
    }));
    return JSON.stringify({ outputs });
  };
}

async function preprocessHandler(): Promise<Handler> {
  await preprocessModel.initialize({
    config: {},
    modelName: 'image_preprocess_model',
    version: '1',
    modelDir: '',
    instanceName: 'baseline',
  });
  return async (body) => {
    const data = await preprocessModel.preprocess(body);
    return JSON.stringify({
      outputs: [
        { name: 'preprocessed_tensor', shape: [3, preprocessModel.SIZE, preprocessModel.SIZE], datatype: 'FP32', data: Array.from(data) },
      ],
    });
  };
}

async function main(): Promise<void> {
  let handler: Handler;
  if (kind === 'onnx') {
    if (!values.model) throw new Error('--model=PATH is required with --kind=onnx');
    handler = await onnxHandler(values.model);
  } else if (kind === 'preprocess') {
    handler = await preprocessHandler();
  } else {
    throw new Error(`--kind must be onnx or preprocess, got '${kind}'`);
  }
  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/health') return reply(res, 200, '{"ready":true}');
    if (req.method !== 'POST' || req.url !== '/infer') return reply(res, 404, '{"error":"not found"}');
    readBody(req)
      .then(handler)
      .then(
        (body) => reply(res, 200, body),
        (e) => reply(res, 400, JSON.stringify({ error: (e as Error).message })),
      );
  });
  server.keepAliveTimeout = 60_000;
  server.listen(port, '127.0.0.1');
  const stop = () => server.close(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((e) => {
  process.stderr.write(`baseline ${kind} server failed: ${(e as Error).message}\n`);
  process.exit(1);
});
