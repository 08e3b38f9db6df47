// The python backend (Triton's python_backend): runs an unmodified
// `<version>/model.py` (class TritonPythonModel) in one stub process per
// instance. See python-instance.ts for the per-instance protocol and
// stub.py / triton_python_backend_utils.py for the Python side.
import fs from 'node:fs';
import path from 'node:path';
import type { Backend, BackendContext, BackendModel } from '../../api/backend.ts';
import { invalidArg } from '../../api/status.ts';
import { PythonInstance } from './python-instance.ts';
import { resolveInterpreter } from './interpreter.ts';
import { sweepStaleShm } from './tensor-transfer.ts';
import { executeTimeoutMs } from './execution-limit.ts';
import { stubMemoryLimitBytes } from './stub-memory-limit.ts';
import { rssOfPids } from '../../sharing/process-memory.ts';
import { log } from '../../../common/logger.ts';

let instanceCounter = 0;

/** A unique, valid shm name prefix for one instance: /tpy.<engine pid>.<n>.<model> */
function shmPrefix(model: string): string {
  return `/tpy.${process.pid}.${++instanceCounter}.${model.replace(/[^A-Za-z0-9_-]/g, '-').slice(0, 64)}`;
}

/** Triton python_backend's INVALID_CHARS for stub names: ;|&$`<>()[]{}\\"'*?~#! */
const STUB_NAME_INVALID = /[;|&$`<>()[\]{}\\"'*?~#!]/;

export const pythonBackend: Backend = {
  name: 'python',
  defaultModelFilename: 'model.py',
  async load(ctx: BackendContext): Promise<BackendModel> {
    // Triton's python backend refuses a stub named with a shell metacharacter (its INVALID_CHARS), in its words.
    if (STUB_NAME_INVALID.test(ctx.modelName)) throw invalidArg('Invalid stub name: contains invalid characters');
    // At every load, not once per process: a readdir beside a stub's start, and an engine started after another
    // in the same process (tests, a supervisor) still sweeps what a killed engine left.
    const n = sweepStaleShm();
    if (n) log.info(`python backend: removed ${n} /dev/shm object(s) left by engines that are gone`);
    const file = path.join(ctx.versionDir, ctx.config.default_model_filename || 'model.py');
    // The file relative to the model's folder: clients see no paths of the host.
    if (!fs.existsSync(file)) throw invalidArg(`model '${ctx.modelName}' version ${ctx.version}: no ${path.relative(ctx.modelDir, file)}`);
    const interpreter = resolveInterpreter(ctx.config, ctx.modelDir, ctx.backendConfig?.python);
    const limitMs = executeTimeoutMs(ctx.config);
    const { stubTimeoutMs, arenaBytes } = pythonBackendSettings(ctx.backendConfig?.python);
    const groups = ctx.config.instance_group ?? [{ name: ctx.modelName, kind: 'KIND_CPU' as const, count: 1 }];
    const memoryLimitBytes = stubMemoryLimitBytes(
      ctx.config,
      ctx.memoryBudgetBytes,
      groups.reduce((n, g) => n + g.count, 0),
    );
    const instances: PythonInstance[] = [];
    for (const g of groups) {
      for (let i = 0; i < g.count; i++) {
        instances.push(
          new PythonInstance(`${g.name}_${i}`, ctx, {
            interpreter,
            modelFile: file,
            prefix: shmPrefix(ctx.modelName),
            kind: g.kind === 'KIND_GPU' ? 'GPU' : g.kind === 'KIND_MODEL' ? 'MODEL' : 'CPU',
            deviceId: g.gpus?.[i % g.gpus.length] ?? 0,
            executeTimeoutMs: limitMs,
            memoryLimitBytes,
            stubTimeoutMs,
            arenaBytes,
          }),
        );
      }
    }
    if (!instances.length) throw invalidArg(`model '${ctx.modelName}': instance_group gives no instance`);
    // The first instance runs auto_complete_config; the rest start with the completed config.
    const first = await Promise.allSettled([instances[0]!.start(true)]);
    const started = first[0]!.status === 'rejected' ? first : await Promise.allSettled(instances.slice(1).map((x) => x.start()));
    const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) {
      await Promise.all(instances.map((x) => x.close()));
      throw failed.reason;
    }
    return {
      instances,
      // Triton asks a python model's is_ready() on readiness checks: ready when every instance says so.
      isReady: async () => (await Promise.all(instances.map((x) => x.isReady()))).every(Boolean),
      // Each stub is a process of its own: the memory budget charges what it holds (VmRSS), read now.
      externalMemoryBytes: () => rssOfPids(instances.flatMap((x) => (x.pid === undefined ? [] : [x.pid]))),
      finalize: async () => {
        await Promise.all(instances.map((x) => x.close()));
      },
    };
  },
};

/**
 * Triton's `--backend-config=python,stub-timeout-seconds=N` (how long a new
 * stub may take to come up; positive) and `shm-default-byte-size=N` (each
 * instance's input arena from the start; at least 1 MiB, as Triton asks).
 */
export function pythonBackendSettings(cfg: Record<string, string> = {}): { stubTimeoutMs?: number; arenaBytes?: number } {
  const out: { stubTimeoutMs?: number; arenaBytes?: number } = {};
  const t = cfg['stub-timeout-seconds'];
  if (t !== undefined) {
    const n = Number(t);
    if (!/^\d+$/.test(t) || !(n > 0))
      throw invalidArg(`--backend-config=python,stub-timeout-seconds must be a positive number of seconds, got '${t}'`);
    out.stubTimeoutMs = n * 1000;
  }
  const b = cfg['shm-default-byte-size'];
  if (b !== undefined) {
    const n = Number(b);
    if (!/^\d+$/.test(b) || !Number.isSafeInteger(n) || n < 1 << 20) {
      throw invalidArg(
        `--backend-config=python,shm-default-byte-size must be a whole number of bytes, at least 1 MiB (1048576), got '${b}'`,
      );
    }
    out.arenaBytes = n;
  }
  return out;
}
