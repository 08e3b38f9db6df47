// Loads a JS model file (model.ts / model.js / model.mjs) wherever its
// repository lives, as Triton's Python models use the server's environment:
//
// - The file and its relative imports are bundled by esbuild into one
//   CommonJS body; every bare import (`sharp`, any package) stays external.
// - Bare imports resolve first from the model's own folder upwards (so a
//   `node_modules` in the model or repository folder wins), then from the
//   engine's own installation. A repository in /tmp or /models therefore
//   loads `sharp` from the engine's node_modules.
// - The body runs in a fresh function scope per execution instance: module
//   state is per instance, and once a model is unloaded nothing refers to
//   its code any more, so reloads do not pile up module copies (an ESM
//   `import()` of a new URL per load stays in the module map for the life
//   of the process). Packages are shared: a reload reuses the loaded `sharp`.
//
// Not supported in model files (bundled as CJS): top-level await.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import vm from 'node:vm';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';

/** A bundled model file, ready to be evaluated once per instance. */
export interface ModelSource {
  file: string;
  code: string;
}

const engineRequire = createRequire(import.meta.url);

/** Bundle `file` with its relative imports into one CJS body; bare imports stay external. */
export async function bundleModelFile(modelFile: string): Promise<ModelSource> {
  const file = path.resolve(modelFile);
  const url = pathToFileURL(file).href;
  const result = await build({
    entryPoints: [file],
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    write: false,
    packages: 'external',
    // import() of a package becomes require(): the scope has no ESM loader behind it.
    supported: { 'dynamic-import': false },
    define: {
      'import.meta.url': JSON.stringify(url),
      'import.meta.filename': JSON.stringify(file),
      'import.meta.dirname': JSON.stringify(path.dirname(file)),
    },
    logLevel: 'silent',
  });
  return { file, code: result.outputFiles[0]!.text };
}

/** A require() for a model file: its own folder's node_modules first, then the engine's installation. */
export function modelRequire(file: string): NodeJS.Require {
  const own = createRequire(file);
  const req = ((id: string) => {
    let resolved: string;
    try {
      resolved = own.resolve(id);
    } catch {
      // not beside the model: the engine's own installation is the documented second place
      resolved = engineRequire.resolve(id);
    }
    return own(resolved);
  }) as NodeJS.Require;
  req.resolve = ((id: string, opts?: { paths?: string[] }) => {
    try {
      return own.resolve(id, opts);
    } catch {
      // as above: fall back to the engine's installation (its error names the module if absent there too)
      return engineRequire.resolve(id, opts);
    }
  }) as NodeJS.RequireResolve;
  req.resolve.paths = own.resolve.paths;
  req.cache = own.cache;
  req.main = own.main;
  req.extensions = own.extensions;
  return req;
}

/** Evaluate a bundled model in a fresh scope; returns its exports. */
export function evaluateModel(src: ModelSource): Record<string, unknown> {
  const fn = vm.compileFunction(src.code, ['exports', 'require', 'module', '__filename', '__dirname'], { filename: src.file });
  const module = { exports: {} as Record<string, unknown> };
  fn(module.exports, modelRequire(src.file), module, src.file, path.dirname(src.file));
  return module.exports;
}

/** The first of `names` present in `dir`, or undefined. */
export function findModelFile(dir: string, names: readonly string[]): string | undefined {
  for (const n of names) {
    const p = path.join(dir, n);
    if (fs.existsSync(p)) return p;
  }
  return undefined;
}
