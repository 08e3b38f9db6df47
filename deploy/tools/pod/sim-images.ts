// The images a simulation of the chart's pods runs, without a registry:
//
// - the app image from the working tree: deploy/Dockerfile's final-stage
//   configuration (ENTRYPOINT tini, USER, WORKDIR, ENV) over the host's
//   system folders, with /app the working tree (built with `npm run build`)
//   and /usr/local/bin holding what the Dockerfile puts there (node,
//   tritonserver): the same command lines, users, volumes and environment
//   as the built image, on this machine's Node and libraries;
// - the app image as built (image:check): its own configuration and root;
// - Redis (redis.dev.image): Debian's redis-server on the host as a stand-in,
//   with the official image's entry reduced to what its docker-entrypoint.sh
//   does for arguments beginning with '-' (run redis-server with them).
import fs from 'node:fs';
import path from 'node:path';
import type { Obj } from './env-vars.ts';
import { DEBIAN_BASE_CONFIG, dockerfileImageConfig, type ImageConfig } from './image-config.ts';
import type { SimImage } from './pod-run.ts';

/** Image references of the rendered workloads' containers (init containers included). */
export function imagesOf(objects: Obj[]): string[] {
  const pods = objects.filter((o) => o.spec?.template?.spec).map((o) => o.spec.template.spec as Obj);
  return [...new Set(pods.flatMap((p) => [...(p.initContainers ?? []), ...p.containers].map((c: Obj) => c.image as string)))];
}

const REDIS_STAND_IN: ImageConfig = {
  entrypoint: ['redis-server'],
  cmd: [],
  user: '999',
  workingDir: '/data',
  env: DEBIAN_BASE_CONFIG.env,
};

/** The app image of the working tree at `root`. */
export function workingTreeApp(root: string): SimImage {
  const config = dockerfileImageConfig(fs.readFileSync(path.join(root, 'deploy/Dockerfile'), 'utf8'), DEBIAN_BASE_CONFIG);
  return {
    config,
    root: {
      kind: 'host',
      tmpfs: ['/usr/local/bin'],
      binds: [
        ['/app', root],
        ['/usr/local/bin/node', process.execPath],
        ['/usr/local/bin/tritonserver', path.join(root, 'deploy/docker/tritonserver')],
      ],
    },
  };
}

/** The built image, unpacked at `rootfs`, with its configuration. */
export const builtApp = (config: ImageConfig, rootfs: string): SimImage => ({ config, root: { kind: 'rootfs', path: rootfs } });

/** The images the chart's rendered `objects` name: `app` for the app image (named by `appImage`), the Redis stand-in for the dev Redis. */
export function simImages(objects: Obj[], appImage: string, app: SimImage): Map<string, SimImage> {
  const out = new Map<string, SimImage>();
  for (const ref of imagesOf(objects)) {
    if (ref === appImage) out.set(ref, app);
    // /data: the official image's working directory (its VOLUME), there even when the pod mounts nothing on it.
    else if (/^(docker\.io\/(library\/)?)?redis:/.test(ref))
      out.set(ref, { config: REDIS_STAND_IN, root: { kind: 'host', tmpfs: ['/data'], binds: [] } });
    else throw new Error(`image '${ref}' has no stand-in in the simulation (the app image is '${appImage}')`);
  }
  return out;
}
