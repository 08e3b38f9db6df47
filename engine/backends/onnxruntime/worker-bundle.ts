// Worker threads do not inherit tsx's hooks on Node 20, and registering tsx
// in every worker costs ~35 MB of memory each (measured). So a worker's
// TypeScript entry is bundled once per process with esbuild into plain ESM
// under engine/backends/onnxruntime/.build/ (content-hashed, written atomically);
// onnxruntime-node stays external and is shared by all threads.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { buildSync } from 'esbuild';

const OUT_DIR = fileURLToPath(new URL('./.build/', import.meta.url));
const NATIVE_INDEX = new URL('../../../native/index.ts', import.meta.url).href;
const cache = new Map<string, URL>();

/** A plain-JS module URL for the worker entry `entry` (a .ts file URL). */
export function bundledWorker(entry: URL): URL {
  const hit = cache.get(entry.href);
  if (hit) return hit;
  const result = buildSync({
    entryPoints: [fileURLToPath(entry)],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    write: false,
    external: ['onnxruntime-node'],
    // The shm addon's loader finds its .node file next to native/index.ts.
    define: { 'import.meta.url': JSON.stringify(NATIVE_INDEX) },
    logLevel: 'silent',
  });
  const code = result.outputFiles[0]!.text;
  const hash = crypto.createHash('sha1').update(code).digest('hex').slice(0, 12);
  const file = path.join(OUT_DIR, `${path.basename(entry.pathname, '.ts')}.${hash}.mjs`);
  if (!fs.existsSync(file)) {
    fs.mkdirSync(OUT_DIR, { recursive: true });
    const tmp = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, code);
    fs.renameSync(tmp, file);
  }
  const url = pathToFileURL(file);
  cache.set(entry.href, url);
  return url;
}
