// Bounds on a model's execution instances, checked at load (issue 41): a
// config asking for 100,000 instances took 6.8 GB and 1,642 threads before it
// was killed. Each instance is a worker thread with its own session (or a
// Python stub process), so the count is refused before any is created, with a
// message naming the config file and the field.
import fs from 'node:fs';
import path from 'node:path';
import { invalidArg } from '../api/status.ts';
import type { ModelConfig } from '../api/model-config.ts';

export interface InstanceLimits {
  /** Instances of one model version (all its instance groups; a GPU group counts once per GPU). */
  perModel: number;
  /** Instances of every loaded model version together, this one included. */
  total: number;
}

export const DEFAULT_INSTANCE_LIMITS: InstanceLimits = { perModel: 64, total: 512 };

/**
 * Least memory one instance takes beyond its weights (a worker thread's isolate and stacks, a session's
 * arenas before its first run; a Python stub's interpreter): the budget check's floor, not an estimate.
 */
export const INSTANCE_FLOOR_BYTES = 8 * 1024 * 1024;

/** The instances a normalized config asks for. */
export function instanceCount(c: ModelConfig): number {
  let n = 0;
  for (const g of c.instance_group ?? []) n += (g.count ?? 1) * (g.kind === 'KIND_GPU' ? Math.max(1, g.gpus?.length ?? 1) : 1);
  return n;
}

export interface InstanceCheck {
  limits: InstanceLimits;
  /** Instances of the other loaded model versions (not this model's versions being replaced). */
  others: number;
  /** --model-memory-budget in bytes, when one is set. */
  budgetBytes?: number;
}

/** Throws INVALID_ARG naming `file` and the field when `c` asks for more instances than the limits allow. */
export function checkInstanceCount(c: ModelConfig, file: string, versionDir: string, check: InstanceCheck): void {
  const n = instanceCount(c);
  const groups = c.instance_group ?? [];
  const field = groups.length === 1 ? 'instance_group[0].count' : 'instance_group[*].count';
  const { perModel, total } = check.limits;
  if (n > perModel)
    throw invalidArg(`${file}: ${field}: ${n} instances is over the maximum of ${perModel} per model (--max-instances-per-model)`);
  if (check.others + n > total) {
    throw invalidArg(
      `${file}: ${field}: ${n} instances with the ${check.others} other models hold is over the maximum of ${total} in all (--max-instances-total)`,
    );
  }
  if (check.budgetBytes !== undefined) {
    const weights = modelFileBytes(versionDir, c.default_model_filename);
    const floor = n * (weights + INSTANCE_FLOOR_BYTES);
    if (floor > check.budgetBytes) {
      throw invalidArg(
        `${file}: ${field}: ${n} instances need at least ${mib(floor)} MiB (${mib(weights)} MiB of model file and ${mib(INSTANCE_FLOOR_BYTES)} MiB each), over the model memory budget of ${mib(check.budgetBytes)} MiB (--model-memory-budget)`,
      );
    }
  }
}

function modelFileBytes(versionDir: string, filename: string | undefined): number {
  if (!filename) return 0;
  try {
    return fs.statSync(path.join(versionDir, filename)).size;
  } catch {
    return 0; // no file (a Python or JS model names none): only the per-instance floor counts
  }
}

const mib = (b: number) => Math.ceil(b / (1024 * 1024));
