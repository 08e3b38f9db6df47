// The console's static assets, read once at startup (no build step, nothing
// read from disk at request time): our own script and stylesheet from
// gateway/console/static/, and uPlot's prebuilt files from node_modules.
// Pages link them as /console/static/<name>?v=<content hash> and replies
// carry an ETag and a year-long immutable Cache-Control: a new build changes
// the hash, so browsers never run stale code.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export interface Asset {
  body: Uint8Array;
  type: string;
  /** First 12 hex digits of the SHA-256 of the body. */
  hash: string;
}

const HERE = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
};

/** Asset name → file it is read from. */
function sources(): Record<string, string> {
  const own = path.join(HERE, 'static');
  const out: Record<string, string> = {
    'uplot.js': require.resolve('uplot/dist/uPlot.iife.min.js'),
    'uplot.css': require.resolve('uplot/dist/uPlot.min.css'),
  };
  for (const f of fs.readdirSync(own)) out[f] = path.join(own, f);
  return out;
}

/** Read every asset now; throws (the gateway does not start) when one is missing. */
export function loadAssets(): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  for (const [name, file] of Object.entries(sources())) {
    const body = fs.readFileSync(file);
    const type = TYPES[path.extname(name)] ?? 'application/octet-stream';
    assets.set(name, { body: new Uint8Array(body), type, hash: createHash('sha256').update(body).digest('hex').slice(0, 12) });
  }
  return assets;
}

/** The URL a page links an asset by (content-hashed, so it may be cached forever). */
export function assetUrl(assets: Map<string, Asset>, name: string): string {
  const a = assets.get(name);
  if (!a) throw new Error(`console asset '${name}' does not exist`);
  return `/console/static/${name}?v=${a.hash}`;
}
