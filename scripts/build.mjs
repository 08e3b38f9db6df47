// `npm run build`: the engine, the gateway, their worker entries and the
// supervisor compiled to plain JavaScript under dist/, one .js per .ts at the
// same relative path (dist/engine/main.js, dist/gateway/main.js, ...), so
// production runs no TypeScript loader. Relative imports are rewritten from
// .ts to .js; packages stay imports of node_modules. Files the code finds next
// to itself (the Python stub, the protos, the console's static files, the shm
// addon) are copied beside their modules.
//
// Plain .mjs on purpose: `npm start` runs it before anything is compiled.
// `--if-stale` skips the build when dist/ was made from the same sources
// (a content hash of every input, kept in dist/.sources-hash).
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const OUT = path.join(ROOT, 'dist');
/** Folders whose TypeScript production runs. */
const SOURCE_DIRS = ['engine', 'gateway', 'client', 'common', 'protocol', 'net', 'native', 'scripts'];
/** Never compiled or copied: build outputs, caches, the addon's C++ sources. */
const SKIP_DIRS = new Set(['node_modules', '.build', '__pycache__', 'src', 'build']);
/** Non-TypeScript files the modules read at run time, by extension. */
const ASSET_EXT = new Set(['.py', '.proto', '.html', '.css', '.js', '.mjs', '.svg', '.json', '.ico', '.png']);
const ADDON = 'native/build/Release/shm.node';

function walk(dir, out) {
  for (const e of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
    const rel = path.join(dir, e.name);
    if (e.isDirectory()) {
      if (!SKIP_DIRS.has(e.name)) walk(rel, out);
    } else if (e.isFile()) out.push(rel);
  }
  return out;
}

/** The inputs: TypeScript sources (not declarations) and assets, sorted. */
export function inputs() {
  const all = SOURCE_DIRS.flatMap((d) => walk(d, [])).sort();
  const sources = all.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'));
  const assets = all.filter((f) => ASSET_EXT.has(path.extname(f)) && f !== 'scripts/build.mjs');
  return { sources, assets };
}

function sourcesHash({ sources, assets }) {
  const h = crypto.createHash('sha256');
  for (const f of [...sources, ...assets, 'package.json']) {
    h.update(f)
      .update('\0')
      .update(fs.readFileSync(path.join(ROOT, f)))
      .update('\0');
  }
  return h.digest('hex');
}

/** Every import stays an import; a relative one is pointed at the compiled .js. */
const keepImports = {
  name: 'keep-imports',
  setup(b) {
    b.onResolve({ filter: /.*/ }, (args) => {
      if (args.kind === 'entry-point') return undefined;
      const p = args.path.startsWith('.') ? args.path.replace(/\.ts$/, '.js') : args.path;
      return { path: p, external: true };
    });
  },
};

export async function compile({ ifStale = false, quiet = false } = {}) {
  const files = inputs();
  const hash = sourcesHash(files);
  const stamp = path.join(OUT, '.sources-hash');
  if (ifStale && fs.existsSync(stamp) && fs.readFileSync(stamp, 'utf8') === hash) return { built: false };
  const t0 = performance.now();
  fs.rmSync(OUT, { recursive: true, force: true });
  await build({
    absWorkingDir: ROOT,
    entryPoints: files.sources,
    outdir: OUT,
    outbase: '.',
    bundle: true,
    plugins: [keepImports],
    platform: 'node',
    format: 'esm',
    target: 'node22',
    sourcemap: 'linked',
    logLevel: 'warning',
  });
  for (const f of [...files.assets, ADDON]) {
    if (!fs.existsSync(path.join(ROOT, f))) {
      if (f === ADDON) throw new Error(`build: ${ADDON} is missing: run \`npm install\` (it builds the shm addon) first`);
      continue;
    }
    fs.mkdirSync(path.dirname(path.join(OUT, f)), { recursive: true });
    fs.copyFileSync(path.join(ROOT, f), path.join(OUT, f));
  }
  fs.writeFileSync(stamp, hash);
  const ms = performance.now() - t0;
  if (!quiet)
    process.stderr.write(
      `build: ${files.sources.length} modules and ${files.assets.length + 1} assets into dist/ in ${ms.toFixed(0)} ms\n`,
    );
  return { built: true, ms };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await compile({ ifStale: process.argv.includes('--if-stale') });
}
