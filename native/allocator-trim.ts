// A periodic malloc_trim (ours, issue 41): glibc keeps the memory that
// freed native allocations leave in its per-thread arenas (onnxruntime's and
// the worker threads', node's own buffers) and reuses it, but rarely returns
// it; under a long mixed load that retention shows as RSS creeping up
// (docs/reliability.md#what-grows-in-a-soak-issue-41-2026-12-06: a trim mid-soak gave back 42 MB
// of the engine's 365 and 27 MB of the gateway's 346). Trimming every
// `everyMs` returns the free pages of every arena to the kernel. It runs on
// the main thread and takes each arena's lock in turn (a few milliseconds on
// these heaps), so it is not done per request. Both processes take
// `--allocator-trim-secs` (default 60, 0: never).
import { performance } from 'node:perf_hooks';
import { mallocTrim } from './index.ts';

export interface AllocatorTrim {
  /** Trims done so far, and the milliseconds the slowest took. */
  readonly trims: number;
  readonly slowestMs: number;
  stop(): void;
}

/** Trim the allocator every `everyMs` (unref'd: it never keeps a process alive); `everyMs` 0 or less: never. */
export function startAllocatorTrim(everyMs: number): AllocatorTrim {
  const state = { trims: 0, slowestMs: 0, stop: () => undefined as void };
  if (!(everyMs > 0)) return state;
  const timer = setInterval(() => {
    const t0 = performance.now();
    try {
      mallocTrim();
    } catch {
      // Not glibc, or an addon built before mallocTrim: RSS just stays higher.
      clearInterval(timer);
      return;
    }
    state.trims++;
    state.slowestMs = Math.max(state.slowestMs, performance.now() - t0);
  }, everyMs);
  timer.unref();
  state.stop = () => clearInterval(timer);
  return state;
}
