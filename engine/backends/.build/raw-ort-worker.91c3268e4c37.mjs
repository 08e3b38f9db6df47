// test/bench/raw-ort-worker.ts
import { parentPort, workerData } from "node:worker_threads";
import * as ort from "onnxruntime-node";
var init = workerData;
var session = await ort.InferenceSession.create(init.modelPath, init.sessionOptions);
var count = init.shape.reduce((a, b) => a * b, 1);
var data = new Float32Array(count);
for (let i = 0; i < count; i++) data[i] = Math.sin(i * 0.37);
var feeds = { [init.inputName]: new ort.Tensor("float32", data, init.shape) };
await session.run(feeds);
parentPort.postMessage({ ready: true });
parentPort.on("message", async (go) => {
  const start = performance.now();
  const windowStart = start + go.warmupMs;
  const windowEnd = windowStart + go.durationMs;
  const latencies = [];
  for (; ; ) {
    const t0 = performance.now();
    if (t0 >= windowEnd) break;
    await session.run(feeds);
    const t1 = performance.now();
    if (t1 >= windowStart && t1 <= windowEnd) latencies.push(t1 - t0);
  }
  await session.release();
  parentPort.postMessage({ latencies });
});
