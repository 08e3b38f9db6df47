// `node --import tsx test/bench/python-hop.ts [--requests=N]`: the per-request
// cost of a python hop. One engine in this process serves add_sub twice: the
// example model.py (python backend, one stub process) and the same math as
// a js model (in the engine's thread). Sequential gRPC ModelInfer calls,
// alternating blocks of each so shared-core noise hits both alike; prints
// p50/mean latency, the difference, and CPU per request (engine process from
// process.cpuUsage, stub from /proc/<pid>/stat). Then the seed's pipeline
// with the model.py preprocessing (raw-RGB mode: Pillow is not installed
// here) as an ensemble in front of the ONNX encoder, against the encoder
// alone on already-preprocessed input.
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startEngine } from '../../engine/server/server.ts';
import { setQuiet } from '../../common/logger.ts';
import { f32Bytes, protoLoaderClient, ROOT } from '../integration/helpers.ts';
import type { PythonInstance } from '../../engine/backends/python/python-instance.ts';
import { PY_PIPELINE_CONFIG } from '../fixtures/test-models.ts';

const JS_MODEL = `export function execute(requests) {
  return requests.map((r) => {
    const a = new Float32Array(r.inputs.INPUT0.data.slice().buffer);
    const b = new Float32Array(r.inputs.INPUT1.data.slice().buffer);
    return { outputs: {
      OUTPUT0: { datatype: 'FP32', shape: [4], data: a.map((x, i) => x + b[i]) },
      OUTPUT1: { datatype: 'FP32', shape: [4], data: a.map((x, i) => x - b[i]) },
    } };
  });
}
`;

function cpuTicks(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return Number(f[11]) + Number(f[12]); // utime + stime (fields 14, 15)
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { requests: { type: 'string', default: '3000' } } });
  const total = Number(values.requests);
  setQuiet(true);
  const repo = mkdtempSync(path.join(os.tmpdir(), `py-hop-${process.pid}-`));
  cpSync(path.join(ROOT, 'examples/python_models/add_sub'), path.join(repo, 'add_sub'), { recursive: true });
  mkdirSync(path.join(repo, 'add_sub_js', '1'), { recursive: true });
  writeFileSync(
    path.join(repo, 'add_sub_js', 'config.pbtxt'),
    readFileSync(path.join(repo, 'add_sub', 'config.pbtxt'), 'utf8')
      .replace('"add_sub"', '"add_sub_js"')
      .replace('backend: "python"', 'backend: "js"\ndefault_model_filename: "model.js"'),
  );
  writeFileSync(path.join(repo, 'add_sub_js', '1', 'model.js'), JS_MODEL);
  cpSync(path.join(ROOT, 'examples/python_models/image_preprocess_model'), path.join(repo, 'image_preprocess_model'), { recursive: true });
  const pre = path.join(repo, 'image_preprocess_model', 'config.pbtxt');
  writeFileSync(pre, readFileSync(pre, 'utf8').replace('string_value: "encoded"', 'string_value: "raw_rgb"'));
  cpSync(path.join(ROOT, 'model_repository/clip_encoder_model'), path.join(repo, 'clip_encoder_model'), { recursive: true });
  mkdirSync(path.join(repo, 'py_pipeline', '1'), { recursive: true });
  writeFileSync(path.join(repo, 'py_pipeline', 'config.pbtxt'), PY_PIPELINE_CONFIG);
  const eng = await startEngine({ modelRepository: repo, grpcPort: 0, httpPort: -1, metricsPort: -1, host: '127.0.0.1' });
  const client = protoLoaderClient(eng.grpcPort);
  const stubPid = (eng.engine.repository.readyVersion('add_sub')!.backend.instances[0] as unknown as PythonInstance).pid!;
  const req = (model: string) => ({
    model_name: model,
    inputs: [
      { name: 'INPUT0', datatype: 'FP32', shape: [4] },
      { name: 'INPUT1', datatype: 'FP32', shape: [4] },
    ],
    raw_input_contents: [f32Bytes([1, 2, 3, 4]), f32Bytes([4, 3, 2, 1])],
  });
  const lat: Record<string, number[]> = { add_sub: [], add_sub_js: [] };
  const cpu: Record<string, { engineUs: number; stubTicks: number }> = {
    add_sub: { engineUs: 0, stubTicks: 0 },
    add_sub_js: { engineUs: 0, stubTicks: 0 },
  };
  for (let i = 0; i < 500; i++) for (const m of ['add_sub', 'add_sub_js']) await client.call('ModelInfer', req(m)); // warm-up
  const BLOCK = 100;
  for (let done = 0; done < total; done += BLOCK) {
    for (const m of ['add_sub', 'add_sub_js']) {
      const c0 = process.cpuUsage();
      const s0 = cpuTicks(stubPid);
      for (let i = 0; i < BLOCK; i++) {
        const t = process.hrtime.bigint();
        await client.call('ModelInfer', req(m));
        lat[m]!.push(Number(process.hrtime.bigint() - t) / 1e3);
      }
      const c1 = process.cpuUsage(c0);
      cpu[m]!.engineUs += c1.user + c1.system;
      cpu[m]!.stubTicks += cpuTicks(stubPid) - s0;
    }
  }
  const tick = 1e6 / 100; // µs per clock tick (CLK_TCK = 100)
  const stat = (m: string) => {
    const a = [...lat[m]!].sort((x, y) => x - y);
    return {
      p50: a[Math.floor(a.length / 2)]!,
      mean: a.reduce((s, x) => s + x, 0) / a.length,
      engineCpu: cpu[m]!.engineUs / a.length,
      stubCpu: (cpu[m]!.stubTicks * tick) / a.length,
    };
  };
  const py = stat('add_sub');
  const js = stat('add_sub_js');
  const f = (x: number) => x.toFixed(0).padStart(6);
  console.log(`requests per model: ${lat.add_sub!.length} (sequential, gRPC, this process is client and engine)`);
  console.log(`model        p50 µs  mean µs  engine+client CPU µs/req  stub CPU µs/req`);
  console.log(`add_sub (py) ${f(py.p50)}  ${f(py.mean)}  ${f(py.engineCpu)}                    ${f(py.stubCpu)}`);
  console.log(`add_sub (js) ${f(js.p50)}  ${f(js.mean)}  ${f(js.engineCpu)}                    ${f(js.stubCpu)}`);
  console.log(
    `python hop:  p50 +${(py.p50 - js.p50).toFixed(0)} µs, CPU +${(py.engineCpu + py.stubCpu - js.engineCpu - js.stubCpu).toFixed(0)} µs per request`,
  );

  // The pipeline with the python preprocessing, against the encoder alone.
  const rgb = Buffer.alloc(224 * 224 * 3, 7);
  const pixels = Buffer.from(new Float32Array(3 * 224 * 224).fill(0.5).buffer);
  const calls: Record<string, object> = {
    pipeline: { model_name: 'py_pipeline', inputs: [{ name: 'RGB', datatype: 'UINT8', shape: [rgb.length] }], raw_input_contents: [rgb] },
    encoder: {
      model_name: 'clip_encoder_model',
      inputs: [{ name: 'pixel_values', datatype: 'FP32', shape: [1, 3, 224, 224] }],
      raw_input_contents: [pixels],
    },
  };
  const pl: Record<string, number[]> = { pipeline: [], encoder: [] };
  for (let i = 0; i < 20; i++) for (const k of Object.keys(calls)) await client.call('ModelInfer', calls[k]!);
  for (let round = 0; round < Math.max(4, total / 200); round++) {
    for (const k of Object.keys(calls)) {
      for (let i = 0; i < 25; i++) {
        const t = process.hrtime.bigint();
        await client.call('ModelInfer', calls[k]!);
        pl[k]!.push(Number(process.hrtime.bigint() - t) / 1e3);
      }
    }
  }
  const p50 = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]!;
  const preStats = eng.server.modelStatistics('image_preprocess_model')[0]!;
  const inferNs = Number(preStats.inference_stats.compute_infer.ns) / Math.max(1, Number(preStats.inference_stats.compute_infer.count));
  console.log(`pipeline (model.py preprocessing raw RGB -> ONNX encoder), ${pl.pipeline!.length} sequential requests:`);
  console.log(
    `  p50 ${(p50(pl.pipeline!) / 1e3).toFixed(2)} ms vs encoder alone ${(p50(pl.encoder!) / 1e3).toFixed(2)} ms; preprocessing step compute_infer mean ${(inferNs / 1e6).toFixed(2)} ms`,
  );
  client.close();
  await eng.stop();
  rmSync(repo, { recursive: true, force: true });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
