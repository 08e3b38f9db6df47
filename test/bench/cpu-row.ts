// One row of section 6: a server process's CPU per request under load from a
// C client (c-clients.ts). A warm-up run first (JIT, pools, connections; not
// counted), then the process's utime+stime from /proc (all threads, and its
// main thread) over a second run, divided by the requests it served. Used for
// the engine's rows (phase-cpu.ts) and the Node floors (cpu-floors.ts).
import type { CLoadResult } from './c-clients.ts';
import type { BenchContext } from './context.ts';
import { cpuSeconds } from './processes.ts';
import type { CpuRow } from './report-cpu.ts';

/**
 * Run `load` twice, and count `pid`'s CPU (ms) per request over the second run.
 * `served` reads the server's own count of successful requests (the engine's
 * statistics); without it the client's count of succeeded requests is used.
 * A failure is returned as a skipped row, never thrown.
 */
export async function cpuRow(
  ctx: BenchContext,
  pid: number,
  id: string,
  label: string,
  load: () => Promise<CLoadResult>,
  served?: () => Promise<number>,
): Promise<CpuRow> {
  try {
    await load();
    const n0 = served ? await served() : 0;
    const c0 = cpuSeconds(pid);
    const r = await load();
    const c1 = cpuSeconds(pid);
    const n = served ? (await served()) - n0 : r.ok;
    if (n <= 0) throw new Error(`no request succeeded (client: ${r.ok} ok, ${r.failed} failed)`);
    const cpuMs = ((c1.total - c0.total) * 1000) / n;
    const mainMs = ((c1.main - c0.main) * 1000) / n;
    ctx.log(`  ${label}: ${cpuMs.toFixed(3)} ms CPU/request (main ${mainMs.toFixed(3)}), ${(n / r.seconds).toFixed(0)}/s`);
    return { id, label, inferences: n, throughput: n / r.seconds, cpuMs, mainMs, failed: r.failed };
  } catch (e) {
    const why = (e as Error).message.split('\n')[0]!.slice(0, 200);
    ctx.log(`  ${label}: NOT MEASURED: ${why}`);
    return { id, label, skipped: why };
  }
}
