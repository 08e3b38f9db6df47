// Phase: one 10 MB input through system shared memory vs the same bytes
// inline in raw_input_contents, measured by H9's benchShmVsInline
// (test/bench/shm-vs-inline.ts); this file only runs it and records it.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { BenchContext } from './context.ts';

interface ShmVsInline {
  shmMs: { p50: number; p95: number };
  inlineMs: { p50: number; p95: number };
  ratio: number;
}

export async function shmPhase(ctx: BenchContext): Promise<void> {
  ctx.log('10 MB: shm vs inline gRPC bytes');
  const url = new URL('./shm-vs-inline.ts', import.meta.url);
  if (!existsSync(fileURLToPath(url))) {
    ctx.notes.push('shm vs inline not measured: test/bench/shm-vs-inline.ts is not there');
    return;
  }
  try {
    const mod = (await import(url.href)) as { benchShmVsInline: (o: Record<string, unknown>) => Promise<ShmVsInline> };
    const r = await mod.benchShmVsInline({ quick: ctx.quick });
    ctx.values.set('shm-p50', r.shmMs.p50);
    ctx.values.set('shm-p95', r.shmMs.p95);
    ctx.values.set('inline-p50', r.inlineMs.p50);
    ctx.values.set('inline-p95', r.inlineMs.p95);
    ctx.log(`  shm p50 ${r.shmMs.p50.toFixed(2)} ms vs inline ${r.inlineMs.p50.toFixed(2)} ms (ratio ${r.ratio.toFixed(3)})`);
  } catch (e) {
    ctx.log(`  shm vs inline failed: ${(e as Error).message}`);
    ctx.notes.push(`shm vs inline not measured: ${(e as Error).message.split('\n')[0]}`);
  }
}
