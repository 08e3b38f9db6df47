// The python backend's per-stub memory limit (ours):
// `parameters { key: "stub_memory_limit" value: { string_value: "512MiB" } }`.
// Enforced by reading the stub's resident set (VmRSS in /proc) every 20 ms
// while it executes and once more when its execute returns: what the stub
// holds, not its peak (VmHWM would keep counting a transient spike of
// initialize() against every later execute, and kill the stub forever). A stub past its limit is killed; the
// requests of that batch fail with an error naming the model, the limit and
// the usage, and the stub starts again for the next request. RLIMIT_AS is no
// use here (numpy and the allocator reserve far more address space than they
// touch); a cgroup needs privileges the engine may not have.
//
// Default: with --model-memory-budget, twice the budget's share per stub of
// this model (2 x budget / its instance count): the budget itself is kept by
// evicting idle models, and a stub may pass its share for a moment (a copy
// made in execute); one holding twice that is past what eviction can make
// room for. Without a budget, no limit.
import type { ModelConfig } from '../../api/model-config.ts';
import { invalidArg, unavailable, type StatusError } from '../../api/status.ts';
import { rssBytesOf } from '../../sharing/process-memory.ts';

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
  if (raw === undefined || raw.trim() === '') return budgetBytes ? Math.floor((2 * budgetBytes) / Math.max(1, stubs)) : undefined;
  const n = parseBytes(raw);
  if (n === undefined || n < 16 * 2 ** 20) {
    throw invalidArg(
      `model '${config.name}': parameter ${STUB_MEMORY_LIMIT_PARAM} must be a size of at least 16MiB (e.g. "512MiB", "2GB"), got '${raw}'`,
    );
  }
  return n;
}

/**
 * `used` and `limit` in MiB with as few decimals as show them apart (a stub 0.4 MiB over a 256 MiB limit reads "256.4
 * MiB, over ... 256.0 MiB", never "256 MiB, over ... 256 MiB"); three suffice, RSS moving by 4 KiB pages.
 */
export function mibApart(used: number, limit: number): [string, string] {
  const at = (n: number, d: number) => (n / 2 ** 20).toFixed(d);
  let d = 0;
  while (d < 3 && at(used, d) === at(limit, d)) d++;
  return [`${at(used, d)} MiB`, `${at(limit, d)} MiB`];
}

/** The error of each request of a batch whose stub passed the limit. */
export function overMemoryError(model: string, instance: string, limit: number, used: number): StatusError {
  const [u, l] = mibApart(used, limit);
  return unavailable(
    `python model '${model}' instance ${instance}: its stub used ${u}, over its ${STUB_MEMORY_LIMIT_PARAM} of ${l}; ` +
      `it was killed and starts again for the next request`,
  );
}

/**
 * Watch one execute of the stub `pid`: `onOver(used)` at most once when its
 * resident set passes `limit`. stop() reads once more and returns it when over.
 */
export function watchStubMemory(pid: number, limit: number, onOver: (used: number) => void, everyMs = 20): { stop(): number | undefined } {
  let fired = false;
  const read = () => {
    const used = rssBytesOf(pid);
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
