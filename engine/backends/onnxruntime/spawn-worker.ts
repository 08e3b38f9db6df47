// Start a worker thread on a TypeScript module, run as a plain-JS bundle
// (see worker-bundle.ts).
import { Worker } from 'node:worker_threads';
import { bundledWorker } from './worker-bundle.ts';

/** A worker running the module at `url` (a .ts file URL) with `workerData`. */
export function spawnWorker(url: URL, workerData: Record<string, unknown>): Worker {
  return new Worker(url.pathname.endsWith('.ts') ? bundledWorker(url) : url, { workerData });
}
