// Preloaded into each soak child (NODE_OPTIONS=--import=soak-probe.mjs; plain
// JS, since it loads before tsx): every SOAK_PROBE_MS it appends the process's
// own memory figures as one JSON line to SOAK_PROBE_FILE, so the soak reads
// V8 heap numbers from outside without any endpoint in the engine or gateway.
// `heapLive` is the heap used just after the latest major (mark-compact) GC:
// heapUsed between collections counts garbage too and swings by tens of MB
// under load, so only the post-GC figure tells retention from churn. It is
// read from a `gc` performance observer, which starts no collection itself.
// NODE_OPTIONS preloads run in every worker thread too (the engine's model
// instances): each thread writes its own lines, tagged with its threadId, and
// the soak adds up the heaps of the threads alive (soak.ts).
import { appendFileSync } from 'node:fs';
import { constants, PerformanceObserver } from 'node:perf_hooks';
import v8 from 'node:v8';
import { threadId } from 'node:worker_threads';

const file = process.env.SOAK_PROBE_FILE;
if (file) {
  const every = Number(process.env.SOAK_PROBE_MS ?? 5000);
  let heapLive;
  let majorGcs = 0;
  new PerformanceObserver((list) => {
    for (const e of list.getEntries())
      if (e.detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) {
        majorGcs++;
        heapLive = v8.getHeapStatistics().used_heap_size;
      }
  }).observe({ entryTypes: ['gc'] });
  const t = setInterval(() => {
    const m = process.memoryUsage();
    const line = {
      t: Date.now(),
      threadId,
      rss: m.rss,
      heapUsed: m.heapUsed,
      heapTotal: m.heapTotal,
      heapLive,
      majorGcs,
      external: m.external,
      arrayBuffers: m.arrayBuffers,
    };
    try {
      appendFileSync(file, `${JSON.stringify(line)}\n`);
    } catch {
      // the soak went away
    }
  }, every);
  t.unref();
}
