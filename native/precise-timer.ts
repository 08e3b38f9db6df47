// Wake-ups at a CLOCK_MONOTONIC time in nanoseconds, to the microsecond, on
// this thread's event loop: one timerfd per thread (src/precise-timer.cc)
// shared by every wake-up through a small list ordered by time.
//
// Why not setTimeout: libuv counts whole milliseconds, so a 500 us dynamic
// batching window (max_queue_delay_microseconds: 500) waited 1-2 ms, which
// Triton does not. Callbacks run as timer callbacks do: one after another,
// microtasks after each batch, an exception thrown by one reported as
// uncaught after the others ran.
import { timerAddon } from './index.ts';
import type { RawTimer } from './shm-addon.d.ts';

interface Wake {
  at: bigint;
  fn: () => void;
}

/** Pending wake-ups, earliest first. */
const pending: Wake[] = [];
let raw: RawTimer | undefined;
/** The time the timerfd is armed for; undefined when disarmed. */
let armedAt: bigint | undefined;

function rearm(): void {
  const first = pending[0];
  if (!first) {
    if (armedAt !== undefined) timerAddon.disarm(raw!);
    armedAt = undefined;
    return;
  }
  if (armedAt === first.at) return;
  raw ??= timerAddon.create(fire);
  timerAddon.arm(raw, first.at);
  armedAt = first.at;
}

function fire(): void {
  armedAt = undefined;
  const now = process.hrtime.bigint();
  let due = 0;
  while (due < pending.length && pending[due]!.at <= now) due++;
  const run = pending.splice(0, due);
  rearm();
  let failure: { e: unknown } | undefined;
  for (const w of run) {
    try {
      w.fn();
    } catch (e) {
      failure ??= { e };
    }
  }
  if (failure) throw failure.e;
}

/** Call `fn` once at `atNs` (process.hrtime.bigint()'s clock; a past time: on the next loop turn). */
export function wakeAt(atNs: bigint, fn: () => void): { cancel(): void } {
  const w: Wake = { at: atNs, fn };
  let i = pending.length;
  while (i > 0 && pending[i - 1]!.at > atNs) i--;
  pending.splice(i, 0, w);
  if (i === 0) rearm();
  return {
    cancel() {
      const j = pending.indexOf(w);
      if (j < 0) return;
      pending.splice(j, 1);
      if (j === 0) rearm();
    },
  };
}

/** Wake-ups not yet run (tests). */
export function pendingWakeups(): number {
  return pending.length;
}
