// Start a worker thread on a TypeScript module, run as a plain-JS bundle
// (see worker-bundle.ts). The bundle needs no loader, so the worker gets no
// execArgv of the engine's: a worker inheriting `--import tsx` (as under
// `npm run engine`) started 3-7x slower (measured: 420-950 ms against
// 130-200 ms on a loaded 2-core host) and carried tsx's memory. (An explicit
// list is checked by Node, which refuses V8 flags such as
// --initial-old-space-size: none is passed at all.)
import { Worker } from 'node:worker_threads';
import { bundledWorker } from './worker-bundle.ts';

/** A worker running the module at `url` (a .ts file URL) with `workerData`. */
export function spawnWorker(url: URL, workerData: Record<string, unknown>): Worker {
  if (!url.pathname.endsWith('.ts')) return new Worker(url, { workerData });
  return new Worker(bundledWorker(url), { workerData, execArgv: [] });
}
