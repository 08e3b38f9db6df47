// Worker for raw-ort.ts: owns one onnxruntime-node session and runs it in a
// closed loop when told to, then reports runs and per-run latencies.
// Threading: this worker's thread only; one run at a time.
import { parentPort, workerData } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';

interface Init {
  modelPath: string;
  inputName: string;
  shape: number[];
  sessionOptions: Record<string, unknown>;
}
interface Go {
  warmupMs: number;
  durationMs: number;
}

const init = workerData as Init;
const session = await ort.InferenceSession.create(init.modelPath, init.sessionOptions as ort.InferenceSession.SessionOptions);
const count = init.shape.reduce((a, b) => a * b, 1);
const data = new Float32Array(count);
for (let i = 0; i < count; i++) data[i] = Math.sin(i * 0.37);
const feeds = { [init.inputName]: new ort.Tensor('float32', data, init.shape) };
await session.run(feeds);
parentPort!.postMessage({ ready: true });

parentPort!.on('message', async (go: Go) => {
  const start = performance.now();
  const windowStart = start + go.warmupMs;
  const windowEnd = windowStart + go.durationMs;
  const latencies: number[] = [];
  for (;;) {
    const t0 = performance.now();
    if (t0 >= windowEnd) break;
    await session.run(feeds);
    const t1 = performance.now();
    if (t1 >= windowStart && t1 <= windowEnd) latencies.push(t1 - t0);
  }
  await session.release();
  parentPort!.postMessage({ latencies });
});
