// Which models to unload so a new one fits the memory budget (ours; Triton
// has no budget). Pure: the repository manager gathers the candidates, this
// picks. Only idle, unpinned models are ever chosen, least recently used
// first, and only as many as needed.

export interface EvictionCandidate {
  name: string;
  /** Resident bytes it frees when unloaded. */
  bytes: number;
  /** When a request last reached it (ms, any clock). */
  lastUsedMs: number;
  /** Requests in flight or queued, a load under way, or an ensemble in use needs it. */
  busy: boolean;
  pinned: boolean;
}

export interface EvictionPlan {
  /** Models to unload, in order. */
  evict: string[];
  /** Whether `needBytes` fits once they are gone. */
  fits: boolean;
}

/**
 * Free room for `needBytes` under `budgetBytes` given `usedBytes` resident:
 * evict idle unpinned models by least recent use until it fits. When even
 * evicting every idle model would not make room, evict nothing.
 */
export function chooseEvictions(
  candidates: readonly EvictionCandidate[],
  needBytes: number,
  usedBytes: number,
  budgetBytes: number,
): EvictionPlan {
  if (usedBytes + needBytes <= budgetBytes) return { evict: [], fits: true };
  const idle = candidates.filter((c) => !c.busy && !c.pinned).sort((a, b) => a.lastUsedMs - b.lastUsedMs || (a.name < b.name ? -1 : 1));
  const evict: string[] = [];
  let used = usedBytes;
  for (const c of idle) {
    if (used + needBytes <= budgetBytes) break;
    evict.push(c.name);
    used -= c.bytes;
  }
  return used + needBytes <= budgetBytes ? { evict, fits: true } : { evict: [], fits: false };
}

/** `--model-memory-budget` value: bytes, or a percentage of `totalBytes`. */
export function parseBudget(v: string, totalBytes: number): number {
  const pct = /^(\d+(?:\.\d+)?)%$/.exec(v);
  if (pct) {
    const p = Number(pct[1]);
    if (p <= 0 || p > 100) throw new Error(`--model-memory-budget: percentage must be in (0, 100], got '${v}'`);
    return Math.floor((totalBytes * p) / 100);
  }
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`--model-memory-budget: expected bytes or a percentage like 50%, got '${v}'`);
  return n;
}
