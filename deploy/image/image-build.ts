// Builds deploy/Dockerfile with buildah: the registry's Node base where it can
// be pulled, else the assembled one (assemble-base.ts) with the same Node.
// Package installs inside the build reach the npm registry through this
// machine's CA bundle when one is configured (a TLS-inspecting proxy): it is
// mounted into the build read-only and named by NODE_EXTRA_CA_CERTS, never
// copied into a layer.
import fs from 'node:fs';
import path from 'node:path';
import { assembleBase, assembleDebian } from './assemble-base.ts';
import { buildah, IMAGE_WORK, log, run, buildahArgv } from './buildah.ts';

/** The bases the Dockerfile names by default: NODE_IMAGE (node:<x.y.z>-bookworm-slim, the build stage) and DEBIAN_IMAGE (the runtime stage). */
export function dockerfileBases(dockerfile: string): { node: string; debian: string; nodeVersion: string } {
  const text = fs.readFileSync(dockerfile, 'utf8');
  const node = /^ARG NODE_IMAGE=(node:(\d+\.\d+\.\d+)-bookworm-slim)$/m.exec(text);
  const debian = /^ARG DEBIAN_IMAGE=(debian:bookworm-slim)$/m.exec(text);
  if (!node || !debian)
    throw new Error(`${dockerfile}: needs 'ARG NODE_IMAGE=node:<x.y.z>-bookworm-slim' and 'ARG DEBIAN_IMAGE=debian:bookworm-slim'`);
  return { node: node[1]!, debian: debian[1]!, nodeVersion: node[2]! };
}

export interface BaseChoice {
  node: string;
  debian: string;
  /** 'registry' when pulled, 'assembled' when built here. */
  source: 'registry' | 'assembled';
  seconds: number;
}

/** Pulls the Dockerfile's bases, or assembles equivalents when the registry does not answer. */
export function chooseBases(dockerfile: string, o: { rebuildBase?: boolean } = {}): BaseChoice {
  const t = Date.now();
  const want = dockerfileBases(dockerfile);
  const refs = [want.node, want.debian].map((i) => `docker.io/library/${i}`);
  log(`base: trying to pull ${refs.join(' and ')}`);
  try {
    for (const ref of refs) buildah(['pull', '--quiet', ref], { timeoutMs: 120_000 });
    return { node: refs[0]!, debian: refs[1]!, source: 'registry', seconds: (Date.now() - t) / 1000 };
  } catch {
    log(`base: the registry cannot be reached from here; assembling Debian bookworm + Node ${want.nodeVersion}`);
  }
  const work = path.join(IMAGE_WORK, 'base');
  const node = assembleBase(want.nodeVersion, work, { rebuild: o.rebuildBase });
  return { node, debian: assembleDebian(work), source: 'assembled', seconds: (Date.now() - t) / 1000 };
}

/** `buildah bud` of the Dockerfile on `base`, tagged `tag`; returns the seconds it took. */
export function buildImage(root: string, dockerfile: string, bases: BaseChoice, tag: string): number {
  const t = Date.now();
  const ca = process.env.NODE_EXTRA_CA_CERTS || process.env.SSL_CERT_FILE || '';
  const caArgs =
    ca && fs.existsSync(ca)
      ? ['--volume', `${ca}:/etc/ssl/build-ca.pem:ro`, '--build-arg', 'NODE_EXTRA_CA_CERTS=/etc/ssl/build-ca.pem']
      : [];
  log(
    `build: buildah bud ${path.relative(root, dockerfile)} on ${bases.node} / ${bases.debian}${caArgs.length ? ` (npm trusts ${ca}, mounted)` : ''}`,
  );
  const [cmd, ...args] = buildahArgv([
    'bud',
    '--isolation',
    'chroot',
    '--network',
    'host',
    '--layers=false',
    '--build-arg',
    `NODE_IMAGE=${bases.node}`,
    '--build-arg',
    `DEBIAN_IMAGE=${bases.debian}`,
    ...caArgs,
    '-f',
    dockerfile,
    '-t',
    tag,
    root,
  ]);
  run(cmd!, args);
  return (Date.now() - t) / 1000;
}
