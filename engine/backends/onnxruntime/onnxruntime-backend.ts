// The onnxruntime backend: one worker thread per execution instance, each
// owning its own InferenceSession (ORT's Node binding blocks its calling
// thread). Requests of a batch are concatenated once into a pooled buffer that
// is transferred to the worker and handed back; outputs come back transferred
// and are split per request as views. A single request whose input sits in a
// registered shm region is read by the worker in place. The per-instance
// worker protocol lives in onnxruntime-instance.ts; this file loads models.
import path from 'node:path';
import fs from 'node:fs';
import { spawnWorker } from './spawn-worker.ts';
import { OnnxInstance } from './onnxruntime-instance.ts';
import type { Backend, BackendContext, BackendModel, IOInfo } from '../../api/backend.ts';
import type { WireMeta } from './onnxruntime-messages.ts';
import { datatypeOfOrt } from './ort-types.ts';
import { readOnnxIO } from './onnx-metadata.ts';
import { invalidArg } from '../../api/status.ts';
import type { ModelConfig } from '../../api/model-config.ts';

// Under tsx the worker's TypeScript (bundled by spawn-worker); compiled, its dist/ JavaScript.
const WORKER_URL = new URL(import.meta.url.endsWith('.ts') ? './onnxruntime-worker.ts' : './onnxruntime-worker.js', import.meta.url);

const flag = (config: ModelConfig, key: string): boolean | undefined => {
  const v = config.parameters?.[key]?.string_value;
  if (v === undefined || v === '') return undefined;
  if (/^(1|true)$/i.test(v)) return true;
  if (/^(0|false)$/i.test(v)) return false;
  throw invalidArg(`model '${config.name}': parameter '${key}' must be "1"/"true" or "0"/"false", got '${v}'`);
};

/** Session options from the config (Triton onnxruntime backend parameter names). */
export function sessionOptionsOf(config: ModelConfig, gpu: boolean): Record<string, unknown> {
  const p = (k: string) => config.parameters?.[k]?.string_value;
  const intra = Number(p('intra_op_thread_count') ?? 1);
  const inter = Number(p('inter_op_thread_count') ?? 1);
  const spinning = p('allow_spinning') ?? '0';
  // Memory for speed, per model: the arena keeps what a run grew for the next run; the pattern pre-plans a run's buffers.
  const arena = flag(config, 'enable_mem_arena');
  const pattern = flag(config, 'enable_mem_pattern');
  const strategy = p('arena_extend_strategy');
  if (strategy !== undefined && !/^(0|1|kNextPowerOfTwo|kSameAsRequested)$/.test(strategy)) {
    throw invalidArg(
      `model '${config.name}': parameter 'arena_extend_strategy' must be 0 (kNextPowerOfTwo) or 1 (kSameAsRequested), got '${strategy}'`,
    );
  }
  const sameAsRequested = strategy === '1' || strategy === 'kSameAsRequested';
  return {
    intraOpNumThreads: intra > 0 ? intra : 1,
    interOpNumThreads: inter > 0 ? inter : 1,
    executionMode: p('execution_mode') === 'parallel' ? 'parallel' : 'sequential',
    graphOptimizationLevel: 'all',
    ...(arena === undefined ? {} : { enableCpuMemArena: arena }),
    ...(pattern === undefined ? {} : { enableMemPattern: pattern }),
    executionProviders: gpu
      ? [{ name: 'cuda', ...(strategy === undefined ? {} : { arena_extend_strategy: sameAsRequested ? 1 : 0 }) }, 'cpu']
      : ['cpu'],
    // Instances share cores: spinning threads would slow each other 2x (measured here).
    extra: { session: { intra_op: { allow_spinning: spinning }, inter_op: { allow_spinning: spinning } } },
  };
}

/** Run options: `memory.enable_memory_arena_shrinkage` ("cpu:0", "gpu:0" or both, ';'-separated) returns arena memory after each run. */
export function runOptionsOf(config: ModelConfig): Record<string, unknown> | undefined {
  const v = config.parameters?.['memory.enable_memory_arena_shrinkage']?.string_value;
  if (v === undefined || v === '') return undefined;
  if (!/^(cpu|gpu):\d+(;(cpu|gpu):\d+)*$/.test(v)) {
    throw invalidArg(
      `model '${config.name}': parameter 'memory.enable_memory_arena_shrinkage' must list devices like "cpu:0" or "cpu:0;gpu:0", got '${v}'`,
    );
  }
  if (v.includes('cpu:') && flag(config, 'enable_mem_arena') === false) {
    throw invalidArg(
      `model '${config.name}': 'memory.enable_memory_arena_shrinkage' shrinks the CPU arena, but 'enable_mem_arena' turns it off`,
    );
  }
  return { extra: { memory: { enable_memory_arena_shrinkage: v } } };
}

function ioOf(meta: WireMeta[], batched: boolean): IOInfo[] {
  return meta.flatMap((m) => {
    const dt = datatypeOfOrt(m.type);
    if (!dt) return [];
    const shape = m.shape.map((d) => (typeof d === 'number' && d >= 0 ? d : -1));
    return [{ name: m.name, datatype: dt, shape: batched ? shape : shape }];
  });
}

function modelPath(ctx: BackendContext): string {
  const file = ctx.config.default_model_filename || 'model.onnx';
  const p = path.join(ctx.versionDir, file);
  if (!fs.existsSync(p))
    throw invalidArg(`model '${ctx.modelName}' version ${ctx.version}: missing model file ${path.relative(path.dirname(ctx.modelDir), p)}`);
  return p;
}

export const onnxruntimeBackend: Backend = {
  name: 'onnxruntime',
  defaultModelFilename: 'model.onnx',
  readModelIO: readOnnxIO,
  async load(ctx: BackendContext): Promise<BackendModel> {
    const file = modelPath(ctx);
    const groups = ctx.config.instance_group ?? [];
    // KIND_GPU only survives normalization where onnxruntime has CUDA (gpu-info.ts).
    const gpu = groups.some((g) => g.kind === 'KIND_GPU');
    const options = sessionOptionsOf(ctx.config, gpu);
    const runOptions = runOptionsOf(ctx.config);
    const instances: OnnxInstance[] = [];
    for (const g of groups) {
      for (let i = 0; i < g.count; i++) {
        const name = `${g.name}_${i}`;
        const spawn = () => spawnWorker(WORKER_URL, { modelPath: file, instanceName: name, sessionOptions: options, runOptions });
        instances.push(new OnnxInstance(name, spawn, ctx));
      }
    }
    try {
      await Promise.all(instances.map((i) => i.ready()));
    } catch (err) {
      await Promise.all(instances.map((i) => i.close()));
      throw err;
    }
    const meta = instances[0]!.meta!;
    const size = fs.statSync(file).size;
    let next = instances.length;
    return {
      instances: [...instances],
      addInstance: async () => {
        const name = `${groups[0]?.name ?? ctx.modelName}_${next++}`;
        const inst = new OnnxInstance(
          name,
          () => spawnWorker(WORKER_URL, { modelPath: file, instanceName: name, sessionOptions: options, runOptions }),
          ctx,
        );
        try {
          await inst.ready();
        } catch (err) {
          await inst.close();
          throw err;
        }
        instances.push(inst);
        return inst;
      },
      removeInstance: async (inst) => {
        // By name: the pool may hold a wrapper of it (rate limiter).
        const i = instances.findIndex((x) => x.name === inst.name);
        if (i < 0) return;
        const [gone] = instances.splice(i, 1);
        await gone!.close();
      },
      io: { inputs: ioOf(meta.inputs, true), outputs: ioOf(meta.outputs, true) },
      memoryBytes: () => size * instances.length,
      finalize: async () => {
        await Promise.all(instances.map((i) => i.close()));
      },
      forgetShm: (key: string) => instances.forEach((i) => i.post({ kind: 'forget-shm', key })),
    };
  },
};
