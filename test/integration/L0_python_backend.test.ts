// The python backend on real stub processes: unmodified Triton-shaped
// model.py files answer exactly over gRPC and HTTP, batch, call other models
// (BLS), stream (decoupled), fail the way Triton does, survive a killed stub,
// and leave no process or /dev/shm object behind after unload.
import { describe, expect, it, vi } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import {
  f32Bytes,
  grpcError,
  httpJson,
  i32Bytes,
  maxAbsDiff,
  seededFloats,
  toF32,
  toI32,
  encodeBytesTensor,
  decodeBytesTensor,
  type ProtoClient,
} from './helpers.ts';
import { pythonRepo, pythonShmEntries, processAlive, pythonEngine } from './python-support.ts';
import type { RunningEngine } from '../../engine/server/server.ts';
import type { PythonInstance } from '../../engine/backends/python/python-instance.ts';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { shmClose, shmMap, shmOpen, shmTruncate, shmUnlinkIfExists } from '../../native/index.ts';
import { PY_PIPELINE_CONFIG } from '../fixtures/test-models.ts';

const BATCH_PROBE = {
  config: `name: "batch_probe"
backend: "python"
max_batch_size: 8
input [ { name: "X", data_type: TYPE_INT32, dims: [ 2 ] } ]
output [
  { name: "Y", data_type: TYPE_INT32, dims: [ 2 ] },
  { name: "N", data_type: TYPE_INT32, dims: [ 1 ] }
]
dynamic_batching { max_queue_delay_microseconds: 300000 preferred_batch_size: [ 4 ] }
`,
  // Y = 2X; N = how many requests this execute() call received.
  model: `import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
            n = np.full((x.shape[0], 1), len(requests), dtype=np.int32)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x * 2), pb_utils.Tensor("N", n)]))
        return out
`,
};

const FAULTY = {
  config: `name: "faulty"
backend: "python"
input [ { name: "MODE", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "OUT", data_type: TYPE_INT32, dims: [ 1 ] } ]
`,
  // 0: answer 7; 1: raise; 2: a TritonError response; 3: sleep (to be killed); 4: print and log, then answer.
  model: `import os, time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        mode = int(pb_utils.get_input_tensor_by_name(requests[0], "MODE").as_numpy()[0])
        if mode == 1:
            raise ValueError("mode one is not allowed")
        if mode == 2:
            return [pb_utils.InferenceResponse(error=pb_utils.TritonError("bad mode", pb_utils.TritonError.INVALID_ARG))]
        if mode == 3:
            time.sleep(30)
        if mode == 4:
            print("plain print on stdout", flush=True)
            pb_utils.Logger.log_error("faulty logs an error")
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([7], dtype=np.int32))])]
`,
};

const BAD_INIT = {
  config: `name: "bad_init"
backend: "python"
input [ { name: "X", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "Y", data_type: TYPE_INT32, dims: [ 1 ] } ]
`,
  model: `import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        assert args["model_name"] == "bad_init" and args["model_version"] == "1"
        raise RuntimeError("cannot find weights.bin")
`,
};

const BYTES_UPPER = {
  config: `name: "bytes_upper"
backend: "python"
input [ { name: "S", data_type: TYPE_STRING, dims: [ -1 ] } ]
output [ { name: "U", data_type: TYPE_STRING, dims: [ -1 ] } ]
`,
  model: `import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            s = pb_utils.get_input_tensor_by_name(r, "S").as_numpy()
            assert s.dtype == np.object_ and isinstance(s[0], bytes)
            u = np.array([x.upper() for x in s], dtype=np.object_)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("U", u)]))
        return out
`,
};

const NO_INTERPRETER = {
  config: `name: "no_interpreter"
backend: "python"
input [ { name: "X", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "Y", data_type: TYPE_INT32, dims: [ 1 ] } ]
parameters { key: "EXECUTION_ENV_PATH" value: { string_value: "/nonexistent/env/bin/python3" } }
`,
  model: 'class TritonPythonModel:\n    pass\n',
};

const AUTO_CFG = {
  config: `name: "auto_cfg"
backend: "python"
`,
  // Triton's auto_complete_config: the config above names no tensors.
  model: `import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        auto_complete_model_config.add_input({"name": "A", "data_type": "TYPE_INT64", "dims": [3]})
        auto_complete_model_config.add_output({"name": "B", "data_type": "TYPE_INT64", "dims": [3]})
        auto_complete_model_config.set_max_batch_size(4)
        auto_complete_model_config.set_dynamic_batching()
        return auto_complete_model_config

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("B", pb_utils.get_input_tensor_by_name(r, "A").as_numpy()[:, ::-1].copy())]) for r in requests]
`,
};

const BLS_GATHER = {
  config: `name: "bls_gather"
backend: "python"
input [ { name: "X", data_type: TYPE_FP32, dims: [ 4 ] } ]
output [ { name: "Y", data_type: TYPE_FP32, dims: [ 4 ] } ]
`,
  // Triton's async pattern: async def execute awaiting several BLS calls at once (add_sub twice, gathered).
  model: `import asyncio
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    async def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
            calls = [
                pb_utils.InferenceRequest(model_name="add_sub", requested_output_names=[name],
                    inputs=[pb_utils.Tensor("INPUT0", x), pb_utils.Tensor("INPUT1", np.full(4, k, dtype=np.float32))]).async_exec()
                for name, k in (("OUTPUT0", 10.0), ("OUTPUT1", 1.0))
            ]
            a, b = await asyncio.gather(*calls)
            y = pb_utils.get_output_tensor_by_name(a, "OUTPUT0").as_numpy() * pb_utils.get_output_tensor_by_name(b, "OUTPUT1").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", y)]))
        return out
`,
};

let repo: string;
let eng: RunningEngine;
let client: ProtoClient;

const stubs = (model: string) => eng.engine.repository.readyVersion(model)!.backend.instances as unknown as PythonInstance[];
const addSubReq = (a: number[], b: number[]) => ({
  model_name: 'add_sub',
  inputs: [
    { name: 'INPUT0', datatype: 'FP32', shape: [4] },
    { name: 'INPUT1', datatype: 'FP32', shape: [4] },
  ],
  raw_input_contents: [f32Bytes(a), f32Bytes(b)],
});
const faultyReq = (mode: number) => ({
  model_name: 'faulty',
  inputs: [{ name: 'MODE', datatype: 'INT32', shape: [1] }],
  raw_input_contents: [i32Bytes([mode])],
});

pythonEngine(
  () =>
    pythonRepo(
      'l0-python',
      ['add_sub', 'bls_encoder', 'decoupled_count', 'image_preprocess_model'],
      {
        batch_probe: BATCH_PROBE,
        faulty: FAULTY,
        bad_init: BAD_INIT,
        bytes_upper: BYTES_UPPER,
        no_interpreter: NO_INTERPRETER,
        auto_cfg: AUTO_CFG,
        bls_gather: BLS_GATHER,
      },
      ['clip_encoder_model'],
    ),
  (s) => ({ repo, eng, client } = s),
  { controlMode: 'explicit', loadModels: ['*'] },
);

describe('L0_python_backend', () => {
  it('add_sub answers exactly over gRPC and HTTP', async () => {
    const res = await client.call('ModelInfer', addSubReq([1, 2.5, -3, 4], [10, 20, 30, 0.5]));
    expect(res.outputs.map((o: { name: string }) => o.name)).toEqual(['OUTPUT0', 'OUTPUT1']);
    expect(res.outputs[0]).toMatchObject({ datatype: 'FP32', shape: ['4'] });
    expect(Array.from(toF32(res.raw_output_contents[0]))).toEqual([11, 22.5, 27, 4.5]);
    expect(Array.from(toF32(res.raw_output_contents[1]))).toEqual([-9, -17.5, -33, 3.5]);

    const http = await httpJson(eng.httpPort, 'POST', '/v2/models/add_sub/infer', {
      inputs: [
        { name: 'INPUT0', datatype: 'FP32', shape: [4], data: [1, 2, 3, 4] },
        { name: 'INPUT1', datatype: 'FP32', shape: [4], data: [4, 3, 2, 1] },
      ],
      outputs: [{ name: 'OUTPUT1' }],
    });
    expect(http.status).toBe(200);
    expect(http.json.outputs).toEqual([{ name: 'OUTPUT1', datatype: 'FP32', shape: [4], data: [-3, -1, 1, 3] }]);
  });

  it('auto_complete_config fills the tensors, batching and batcher the config left out', async () => {
    const meta = await client.call('ModelMetadata', { name: 'auto_cfg' });
    expect(meta.inputs).toEqual([{ name: 'A', datatype: 'INT64', shape: ['-1', '3'] }]);
    expect(meta.outputs).toEqual([{ name: 'B', datatype: 'INT64', shape: ['-1', '3'] }]);
    const cfg = (await client.call('ModelConfig', { name: 'auto_cfg' })).config;
    expect(cfg.max_batch_size).toBe(4);
    expect(cfg.dynamic_batching).toBeTruthy();
    const a = Buffer.from(BigInt64Array.from([1n, 2n, 3n, 4n, 5n, 6n]).buffer);
    const res = await client.call('ModelInfer', {
      model_name: 'auto_cfg',
      inputs: [{ name: 'A', datatype: 'INT64', shape: [2, 3] }],
      raw_input_contents: [a],
    });
    expect(Array.from(new BigInt64Array(Uint8Array.from(res.raw_output_contents[0]).buffer))).toEqual([3n, 2n, 1n, 6n, 5n, 4n]);
  });

  it('BYTES tensors arrive as object arrays of bytes', async () => {
    const res = await client.call('ModelInfer', {
      model_name: 'bytes_upper',
      inputs: [{ name: 'S', datatype: 'BYTES', shape: [2] }],
      raw_input_contents: [encodeBytesTensor(['triton', 'py'])],
    });
    expect(decodeBytesTensor(res.raw_output_contents[0]).map(String)).toEqual(['TRITON', 'PY']);
  });

  it('dynamic batching hands execute several requests at once', async () => {
    const all = await Promise.all(
      [1, 2, 3, 4].map((k) =>
        client.call('ModelInfer', {
          model_name: 'batch_probe',
          inputs: [{ name: 'X', datatype: 'INT32', shape: [1, 2] }],
          raw_input_contents: [i32Bytes([k, -k])],
        }),
      ),
    );
    all.forEach((r, i) => expect(Array.from(toI32(r.raw_output_contents[0]))).toEqual([2 * (i + 1), -2 * (i + 1)]));
    expect(Math.max(...all.map((r) => toI32(r.raw_output_contents[1])[0]!))).toBeGreaterThan(1);
    const stats = (await client.call('ModelStatistics', { name: 'batch_probe' })).model_stats[0];
    expect(Number(stats.inference_count)).toBe(4);
    expect(Number(stats.execution_count)).toBeLessThan(4);
  });

  it('BLS: exec() and async_exec() run the ONNX encoder; the model scales its input in place', async () => {
    const pixels = seededFloats(3 * 224 * 224, 7, 0, 255);
    const scaled = pixels.map((v) => v / 255);
    const direct = await client.call('ModelInfer', {
      model_name: 'clip_encoder_model',
      inputs: [{ name: 'pixel_values', datatype: 'FP32', shape: [1, 3, 224, 224] }],
      raw_input_contents: [Buffer.from(scaled.buffer)],
    });
    const want = toF32(direct.raw_output_contents[0]);
    for (const mode of ['sync', 'async']) {
      const res = await client.call('ModelInfer', {
        model_name: 'bls_encoder',
        inputs: [{ name: 'PIXELS', datatype: 'FP32', shape: [1, 3, 224, 224] }],
        raw_input_contents: [Buffer.from(pixels.buffer)],
        parameters: { mode: { string_param: mode } },
      });
      const emb = toF32(res.raw_output_contents[0]);
      expect(maxAbsDiff(emb, want)).toBeLessThan(1e-6);
      const norm = Math.hypot(...emb);
      expect(Math.abs(toF32(res.raw_output_contents[1])[0]! - norm)).toBeLessThan(1e-4);
    }
  });

  it('async def execute awaits several async_exec BLS calls at once', async () => {
    const res = await client.call('ModelInfer', {
      model_name: 'bls_gather',
      inputs: [{ name: 'X', datatype: 'FP32', shape: [4] }],
      raw_input_contents: [f32Bytes([1, 2, 3, 4])],
    });
    // (x + 10) * (x - 1)
    expect(Array.from(toF32(res.raw_output_contents[0]))).toEqual([0, 12, 26, 42]);
  });

  it("a client's system-shm input reaches the stub unchanged and the model's in-place edit does not touch it", async () => {
    const key = `/py_in_${process.pid}`;
    const pixels = seededFloats(3 * 224 * 224, 11, 0, 255);
    const fd = shmOpen(key, { create: true });
    try {
      shmTruncate(fd, pixels.byteLength);
      const m = shmMap(fd, 0, pixels.byteLength);
      m.bytes.set(new Uint8Array(pixels.buffer));
      await client.call('SystemSharedMemoryRegister', { name: 'py_in', key, offset: 0, byte_size: pixels.byteLength });
      const res = await client.call('ModelInfer', {
        model_name: 'bls_encoder',
        inputs: [
          {
            name: 'PIXELS',
            datatype: 'FP32',
            shape: [1, 3, 224, 224],
            parameters: { shared_memory_region: { string_param: 'py_in' }, shared_memory_byte_size: { int64_param: pixels.byteLength } },
          },
        ],
      });
      const plain = await client.call('ModelInfer', {
        model_name: 'bls_encoder',
        inputs: [{ name: 'PIXELS', datatype: 'FP32', shape: [1, 3, 224, 224] }],
        raw_input_contents: [Buffer.from(pixels.buffer)],
      });
      expect(maxAbsDiff(toF32(res.raw_output_contents[0]), toF32(plain.raw_output_contents[0]))).toBe(0);
      expect(Buffer.compare(Buffer.from(m.bytes), Buffer.from(pixels.buffer))).toBe(0);
      m.close();
    } finally {
      await client.call('SystemSharedMemoryUnregister', { name: 'py_in' }).catch(() => undefined);
      shmClose(fd);
      shmUnlinkIfExists(key);
    }
  });

  it("decoupled: N responses stream over ModelStreamInfer; unary gRPC and HTTP get Triton's error", async () => {
    const got: number[] = [];
    const errors: string[] = [];
    await new Promise<void>((resolve, reject) => {
      const call = client.raw.ModelStreamInfer() as grpc.ClientDuplexStream<
        unknown,
        { error_message: string; infer_response: { raw_output_contents: Buffer[] } }
      >;
      call.on('data', (m) => {
        if (m.error_message) errors.push(m.error_message);
        else got.push(toI32(m.infer_response.raw_output_contents[0]!)[0]!);
      });
      call.on('error', reject);
      call.on('end', resolve);
      call.write({
        model_name: 'decoupled_count',
        inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }],
        raw_input_contents: [i32Bytes([4])],
      });
      call.write({
        model_name: 'decoupled_count',
        inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }],
        raw_input_contents: [i32Bytes([-1])],
      });
      call.end();
    });
    expect(got).toEqual([0, 1, 2, 3]);
    expect(errors).toEqual(['IN must be >= 0']);

    // With triton_enable_empty_final_response, the stream also carries an empty response marked final.
    const finals: Array<{ outputs: number; final: boolean }> = [];
    await new Promise<void>((resolve, reject) => {
      const call = client.raw.ModelStreamInfer() as grpc.ClientDuplexStream<
        unknown,
        { infer_response: { outputs: unknown[]; parameters: Record<string, { bool_param?: boolean }> } }
      >;
      call.on('data', (m) =>
        finals.push({ outputs: m.infer_response.outputs.length, final: !!m.infer_response.parameters?.triton_final_response?.bool_param }),
      );
      call.on('error', reject);
      call.on('end', resolve);
      call.write({
        model_name: 'decoupled_count',
        inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }],
        raw_input_contents: [i32Bytes([2])],
        parameters: { triton_enable_empty_final_response: { bool_param: true } },
      });
      call.end();
    });
    expect(finals).toEqual([
      { outputs: 1, final: false },
      { outputs: 1, final: false },
      { outputs: 0, final: true },
    ]);

    const e = await grpcError(
      client.call('ModelInfer', {
        model_name: 'decoupled_count',
        inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }],
        raw_input_contents: [i32Bytes([2])],
      }),
    );
    expect(e).toEqual({
      code: grpc.status.UNIMPLEMENTED,
      details: "ModelInfer RPC doesn't support models with decoupled transaction policy",
    });
    const h = await httpJson(eng.httpPort, 'POST', '/v2/models/decoupled_count/infer', {
      inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: [2] }],
    });
    expect(h.status).toBe(501);
    expect(h.json.error).toBe("HTTP end point doesn't support models with decoupled transaction policy");
  });

  it('an exception in initialize makes the model UNAVAILABLE with the message and file:line; others load', async () => {
    const index = await client.call('RepositoryIndex', {});
    const bad = index.models.find((m: { name: string }) => m.name === 'bad_init');
    expect(bad.state).toBe('UNAVAILABLE');
    expect(bad.reason).toContain("RuntimeError: cannot find weights.bin (model 'bad_init' 1/model.py:6)");
    const ok = index.models.filter((m: { state: string }) => m.state === 'READY').map((m: { name: string }) => m.name);
    expect(ok).toEqual(expect.arrayContaining(['add_sub', 'batch_probe', 'bls_encoder', 'decoupled_count', 'faulty']));
  });

  it('a missing interpreter makes only that model UNAVAILABLE, saying so', async () => {
    const index = await client.call('RepositoryIndex', {});
    const m = index.models.find((x: { name: string }) => x.name === 'no_interpreter');
    expect(m.state).toBe('UNAVAILABLE');
    expect(m.reason).toBe(
      "python interpreter '/nonexistent/env/bin/python3' not found (model 'no_interpreter' parameter EXECUTION_ENV_PATH)",
    );
  });

  it('the image preprocessing model.py says it needs Pillow when it is not installed, and runs on raw RGB', async () => {
    const index = await client.call('RepositoryIndex', {});
    const m = index.models.find((x: { name: string }) => x.name === 'image_preprocess_model');
    let hasPil = true;
    try {
      (await import('node:child_process')).execFileSync('python3', ['-c', 'import PIL']);
    } catch {
      hasPil = false;
    }
    if (!hasPil) {
      expect(m.state).toBe('UNAVAILABLE');
      expect(m.reason).toContain("decoding JPEG/PNG needs Pillow, which this interpreter lacks (No module named 'PIL')");
    }
    // raw_rgb needs no decoder: reload with that parameter and check the normalization exactly.
    await client.call('RepositoryModelLoad', {
      model_name: 'image_preprocess_model',
      parameters: {
        config: {
          string_param: JSON.stringify({
            name: 'image_preprocess_model',
            backend: 'python',
            max_batch_size: 0,
            input: [{ name: 'image_bytes', data_type: 'TYPE_UINT8', dims: [-1] }],
            output: [{ name: 'preprocessed_tensor', data_type: 'TYPE_FP32', dims: [3, 224, 224] }],
            parameters: { input_format: { string_value: 'raw_rgb' } },
          }),
        },
      },
    });
    const rgb = Buffer.alloc(224 * 224 * 3);
    for (let i = 0; i < rgb.length; i++) rgb[i] = (i * 31) % 256;
    const res = await client.call('ModelInfer', {
      model_name: 'image_preprocess_model',
      inputs: [{ name: 'image_bytes', datatype: 'UINT8', shape: [rgb.length] }],
      raw_input_contents: [rgb],
    });
    const out = toF32(res.raw_output_contents[0]);
    const MEAN = [0.48145466, 0.4578275, 0.40821073];
    const STD = [0.26862954, 0.26130258, 0.27577711];
    let worst = 0;
    for (const [c, y, x] of [
      [0, 0, 0],
      [1, 100, 37],
      [2, 223, 223],
      [0, 57, 190],
    ] as const) {
      const want = (rgb[(y * 224 + x) * 3 + c]! / 255 - MEAN[c]!) / STD[c]!;
      worst = Math.max(worst, Math.abs(out[c * 224 * 224 + y * 224 + x]! - want));
    }
    expect(worst).toBeLessThan(1e-5);

    // The python preprocessing as an ensemble step in front of the ONNX encoder.
    mkdirSync(path.join(repo, 'py_pipeline', '1'), { recursive: true });
    writeFileSync(path.join(repo, 'py_pipeline', 'config.pbtxt'), PY_PIPELINE_CONFIG);
    await client.call('RepositoryModelLoad', { model_name: 'py_pipeline' });
    const viaEnsemble = await client.call('ModelInfer', {
      model_name: 'py_pipeline',
      inputs: [{ name: 'RGB', datatype: 'UINT8', shape: [rgb.length] }],
      raw_input_contents: [rgb],
    });
    const direct = await client.call('ModelInfer', {
      model_name: 'clip_encoder_model',
      inputs: [{ name: 'pixel_values', datatype: 'FP32', shape: [1, 3, 224, 224] }],
      raw_input_contents: [Buffer.from(out.buffer)],
    });
    expect(maxAbsDiff(toF32(viaEnsemble.raw_output_contents[0]), toF32(direct.raw_output_contents[0]))).toBeLessThan(1e-6);
    await client.call('RepositoryModelUnload', { model_name: 'py_pipeline' });
  });

  it('an exception in execute fails that request with its text; a TritonError keeps its code; the stub lives on', async () => {
    const pid = stubs('faulty')[0]!.pid;
    const e = await grpcError(client.call('ModelInfer', faultyReq(1)));
    expect(e.code).toBe(grpc.status.INTERNAL);
    expect(e.details).toContain("ValueError: mode one is not allowed (model 'faulty' 1/model.py:9)");
    const e2 = await grpcError(client.call('ModelInfer', faultyReq(2)));
    expect(e2).toEqual({ code: grpc.status.INVALID_ARGUMENT, details: 'bad mode' });
    const ok = await client.call('ModelInfer', faultyReq(0));
    expect(Array.from(toI32(ok.raw_output_contents[0]))).toEqual([7]);
    expect(stubs('faulty')[0]!.pid).toBe(pid);
  });

  it("the model's stdout and pb_utils.Logger reach the engine log tagged with model and instance, never the channel", async () => {
    const lines: string[] = [];
    const spy = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      lines.push(String(chunk));
      return true;
    });
    try {
      const ok = await client.call('ModelInfer', faultyReq(4));
      expect(Array.from(toI32(ok.raw_output_contents[0]))).toEqual([7]);
      for (const until = Date.now() + 5000; !lines.some((l) => l.includes('faulty logs an error')) && Date.now() < until; ) {
        await new Promise((r) => setTimeout(r, 20));
      }
    } finally {
      spy.mockRestore();
    }
    expect(lines.some((l) => /^E\S+ python 'faulty' faulty_0_0: faulty logs an error\n$/.test(l))).toBe(true);
  });

  it('a stub killed with SIGKILL mid-request fails that request; the next one restarts it and succeeds', async () => {
    const pid = stubs('faulty')[0]!.pid!;
    const held = grpcError(client.call('ModelInfer', faultyReq(3)));
    await new Promise((r) => setTimeout(r, 300));
    process.kill(pid, 'SIGKILL');
    const e = await held;
    expect(e.code).toBe(grpc.status.INTERNAL);
    expect(e.details).toMatch(/python stub of instance faulty_0_0 of model 'faulty' killed by SIGKILL while executing/);
    const ok = await client.call('ModelInfer', faultyReq(0));
    expect(Array.from(toI32(ok.raw_output_contents[0]))).toEqual([7]);
    expect(stubs('faulty')[0]!.pid).not.toBe(pid);
  });

  it('unload leaves no stub process and no /dev/shm object', async () => {
    // bls_encoder has used its input arena and its stub's output objects by now.
    const pids = [...stubs('bls_encoder'), ...stubs('add_sub')].map((s) => s.pid!);
    expect(pids.every(processAlive)).toBe(true);
    expect(pythonShmEntries().length).toBeGreaterThan(0);
    for (const m of [
      'add_sub',
      'batch_probe',
      'bls_encoder',
      'decoupled_count',
      'faulty',
      'bytes_upper',
      'image_preprocess_model',
      'auto_cfg',
      'bls_gather',
    ]) {
      await client.call('RepositoryModelUnload', { model_name: m });
    }
    expect(pids.some(processAlive)).toBe(false);
    expect(pythonShmEntries()).toEqual([]);
  });
});
