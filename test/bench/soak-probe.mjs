// Preloaded into each soak child (NODE_OPTIONS=--import=soak-probe.mjs; plain
// JS, since it loads before tsx): every SOAK_PROBE_MS it appends the process's
// own memory figures as one JSON line to SOAK_PROBE_FILE, so the soak reads
// V8 heap numbers from outside without any endpoint in the engine or gateway.
import { appendFileSync } from 'node:fs';

const file = process.env.SOAK_PROBE_FILE;
if (file) {
  const every = Number(process.env.SOAK_PROBE_MS ?? 5000);
  const t = setInterval(() => {
    const m = process.memoryUsage();
    const line = {
      t: Date.now(),
      rss: m.rss,
      heapUsed: m.heapUsed,
      heapTotal: m.heapTotal,
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
