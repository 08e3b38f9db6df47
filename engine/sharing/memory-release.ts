// Giving memory back after very large messages. A 100 MB gRPC message is
// received as many small chunks, joined, decoded and copied: three at once
// left the engine ~600 MB larger 5 s later (measured; docs/reliability.md).
// It is not a leak: the same calls again did not add more. Dead Buffers that
// V8 does not collect while the process is idle (no heap pressure) hold about
// half of it: a full GC one second after the last large request returns that.
// The rest is glibc keeping freed chunks in its arenas for reuse.
import v8 from 'node:v8';
import vm from 'node:vm';
import { tracer } from '../../common/logger.ts';

const trace = tracer('memory');

/** Full GCs run, one per delay, after the last large request. */
const PASSES = 2;

/** Requests carrying at least this many bytes inline schedule a GC. */
export const LARGE_REQUEST_BYTES = 16 * 1024 * 1024;

let gcFn: (() => void) | undefined | null;
function gc(): (() => void) | undefined {
  if (gcFn === undefined) {
    try {
      v8.setFlagsFromString('--expose-gc');
      gcFn = vm.runInNewContext('gc') as () => void;
    } catch {
      // V8 refused the flag: release without a forced collection
      gcFn = null;
    }
  }
  return gcFn ?? undefined;
}

/** Schedules one full GC `delayMs` after the last large request (debounced); owned by the InferenceServer. */
export class MemoryRelease {
  private timer: NodeJS.Timeout | undefined;
  /** GCs run so far (tests). */
  collections = 0;

  constructor(
    private readonly delayMs = 1000,
    private readonly thresholdBytes = LARGE_REQUEST_BYTES,
  ) {}

  /** A request that carried `bytes` inline has finished. */
  note(bytes: number): void {
    if (bytes < this.thresholdBytes) return;
    clearTimeout(this.timer);
    let passes = 0;
    const pass = () => {
      this.timer = undefined;
      const run = gc();
      if (!run) return;
      const t0 = process.hrtime.bigint();
      run();
      this.collections++;
      trace(`full GC after large requests: ${Number(process.hrtime.bigint() - t0) / 1e6} ms`);
      // Backing stores of dead Buffers are freed after the GC that found them
      // dead; later passes let malloc see those frees and trim.
      if (++passes < PASSES) {
        this.timer = setTimeout(pass, this.delayMs);
        this.timer.unref();
      }
    };
    this.timer = setTimeout(pass, this.delayMs);
    this.timer.unref();
  }

  stop(): void {
    clearTimeout(this.timer);
  }
}
