// Phase: one 10 MB input through system shared memory vs the same bytes
// inline in raw_input_contents, measured by benchShmVsInline
// (test/bench/shm-vs-inline.ts, its own engine in this process); this file
// only runs it and records the figures.
import type { BenchContext } from './context.ts';
import { benchShmVsInline } from './shm-vs-inline.ts';

export async function shmPhase(ctx: BenchContext): Promise<void> {
  ctx.log('10 MB: shm vs inline gRPC bytes');
  try {
    const r = await benchShmVsInline({ quick: ctx.quick });
    ctx.values.set('shm-p50', r.shmMs.p50);
    ctx.values.set('shm-p95', r.shmMs.p95);
    ctx.values.set('inline-p50', r.inlineMs.p50);
    ctx.values.set('inline-p95', r.inlineMs.p95);
    ctx.values.set('shm-copy-p50', r.shmWithCopyMs.p50);
    ctx.values.set('shm-bytes', r.bytes);
    ctx.log(`  shm p50 ${r.shmMs.p50.toFixed(2)} ms vs inline ${r.inlineMs.p50.toFixed(2)} ms (ratio ${r.ratio.toFixed(3)})`);
  } catch (e) {
    ctx.log(`  shm vs inline failed: ${(e as Error).message}`);
    ctx.notes.push(`shm vs inline not measured: ${(e as Error).message.split('\n')[0]}`);
  }
}
