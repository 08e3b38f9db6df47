// Setup file: CPU time one test file spent, for the slowest-suites reporter.
// Each file runs in a fresh fork (vitest's `isolate`), so the process's own
// CPU since this file loaded is the file's: the main thread, its worker
// threads (engine instances) and, from /proc/self/stat, the child processes
// it has already waited for (engines, Python stubs, Chromium). Children still
// alive at the end are not counted: a lower bound, cheap to take.
import { readFileSync } from 'node:fs';
import { afterAll } from 'vitest';

/** Reaped children's user + system CPU in ms (fields 16 and 17 of /proc/self/stat), 0 off Linux. */
function childrenCpuMs(): number {
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[13]) + Number(fields[14])) * 1000) / 100; // clock ticks, USER_HZ = 100 on Linux
  } catch {
    return 0;
  }
}

const self0 = process.cpuUsage();
const children0 = childrenCpuMs();

afterAll(({}, file) => {
  const self = process.cpuUsage(self0);
  (file.meta as Record<string, unknown>).cpuMs = {
    self: Math.round((self.user + self.system) / 1000),
    children: Math.round(childrenCpuMs() - children0),
  };
});
