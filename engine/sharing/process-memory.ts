// What processes really hold, for the memory budget (ours): resident set
// sizes read from /proc (the engine's own and a Python stub's), and giving
// the allocator's free memory back after an unload so RSS shows it.
import fs from 'node:fs';
import { mallocTrim } from '../../native/index.ts';

/** VmRSS of process `pid` in bytes; undefined when it is gone or /proc cannot be read. */
export function rssBytesOf(pid: number | 'self'): number | undefined {
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'latin1'));
    return m ? Number(m[1]) * 1024 : undefined;
  } catch {
    // The process is gone (a stub that exited): it holds nothing; the caller counts 0.
    return undefined;
  }
}

/** This process's RSS in bytes (/proc when there, else Node's figure). */
export function selfRssBytes(): number {
  return rssBytesOf('self') ?? process.memoryUsage().rss;
}

/** Sum of the RSS of `pids` (gone ones count 0). */
export function rssOfPids(pids: Iterable<number>): number {
  let s = 0;
  for (const p of pids) s += rssBytesOf(p) ?? 0;
  return s;
}

/** Return freed heap memory to the kernel; never throws (an allocator without malloc_trim keeps it). */
export function trimAllocator(): void {
  try {
    mallocTrim();
  } catch {
    // not glibc, or the addon is older than this call: RSS just stays higher
  }
}
