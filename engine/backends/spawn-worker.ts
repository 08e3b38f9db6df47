// Start a worker thread on a .ts module. Worker threads do not inherit tsx's
// hooks on Node 20, so a small .mjs bootstrap registers them first.
import { Worker } from 'node:worker_threads';

const BOOT = new URL('./worker-boot.mjs', import.meta.url);

/** A worker running the module at `url` (a .ts file URL) with `workerData`. */
export function spawnWorker(url: URL, workerData: Record<string, unknown>): Worker {
  if (!url.pathname.endsWith('.ts')) return new Worker(url, { workerData });
  return new Worker(BOOT, { workerData: { ...workerData, __entry: url.href } });
}
