// The python backend's per-stub memory limit (ours):
// `parameters { key: "stub_memory_limit" value: { string_value: "512MiB" } }`.
// Enforced by watching the stub's peak resident set (VmHWM in /proc, so a
// spike between two reads is not missed) every 20 ms while it executes and
// once more when its execute returns. A stub past its limit is killed; the
// requests of that batch fail with an error naming the model, the limit and
// the usage, and the stub starts again for the next request. RLIMIT_AS is no
// use here (numpy and the allocator reserve far more address space than they
// touch); a cgroup needs privileges the engine may not have.
//
// Default: with --model-memory-budget, the budget's share per stub of this
// model (budget / its instance count), so one model's stubs cannot together
// pass the budget; without one, no limit.
import fs from 'node:fs';
import type { ModelConfig } from '../../api/model-config.ts';
import { invalidArg, unavailable, type StatusError } from '../../api/status.ts';

/** The config parameter's name. */
export const STUB_MEMORY_LIMIT_PARAM = 'stub_memory_limit';

const UNITS: Record<string, number> = { '': 1, b: 1, kb: 1e3, mb: 1e6, gb: 1e9, kib: 2 ** 10, mib: 2 ** 20, gib: 2 ** 30 };

/** "512MiB", "1.5GB", "1048576" -> bytes; undefined when malformed. */
export function parseBytes(text: string): number | undefined {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(text);
  const unit = m ? UNITS[m[2]!.toLowerCase()] : undefined;
  if (!m || unit === undefined) return undefined;
  const n = Math.floor(Number(m[1]) * unit);
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

/** The limit of each stub of `config` in bytes, or undefined for none; INVALID_ARG naming the parameter when malformed. */
export function stubMemoryLimitBytes(config: ModelConfig, budgetBytes: number | undefined, stubs: number): number | undefined {
  const raw = config.parameters?.[STUB_MEMORY_LIMIT_PARAM]?.string_value;
  if (raw === undefined || raw.trim() === '') return budgetBytes ? Math.floor(budgetBytes / Math.max(1, stubs)) : undefined;
  const n = parseBytes(raw);
  if (n === undefined || n < 16 * 2 ** 20) {
    throw invalidArg(
      `model '${config.name}': parameter ${STUB_MEMORY_LIMIT_PARAM} must be a size of at least 16MiB (e.g. "512MiB", "2GB"), got '${raw}'`,
    );
  }
  return n;
}

/** Peak resident set (VmHWM) of `pid` in bytes; undefined when it cannot be read (the process is gone). */
export function peakRssOf(pid: number): number | undefined {
  try {
    const m = /^VmHWM:\s+(\d+)\s+kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'latin1'));
    return m ? Number(m[1]) * 1024 : undefined;
  } catch {
    // gone: the exit handler reports it
    return undefined;
  }
}

const mib = (n: number) => `${(n / 2 ** 20).toFixed(0)} MiB`;

/** The error of each request of a batch whose stub passed the limit. */
export function overMemoryError(model: string, instance: string, limit: number, used: number): StatusError {
  return unavailable(
    `python model '${model}' instance ${instance}: its stub used ${mib(used)}, over its ${STUB_MEMORY_LIMIT_PARAM} of ${mib(limit)}; ` +
      `it was killed and starts again for the next request`,
  );
}

/**
 * Watch one execute of the stub `pid`: `onOver(used)` at most once when its
 * peak passes `limit`. stop() reads once more and returns the peak when over.
 */
export function watchStubMemory(pid: number, limit: number, onOver: (used: number) => void, everyMs = 20): { stop(): number | undefined } {
  let fired = false;
  const read = () => {
    const used = peakRssOf(pid);
    return used !== undefined && used > limit ? used : undefined;
  };
  const timer = setInterval(() => {
    const used = read();
    if (used !== undefined && !fired) {
      fired = true;
      clearInterval(timer);
      onOver(used);
    }
  }, everyMs);
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      return fired ? undefined : read();
    },
  };
}
