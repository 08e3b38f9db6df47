// What the kubelet would run for a pod template of a rendered manifest, as
// plain data: every container (init containers first, in order) with its
// argv, environment, user and groups, working directory, mounts and probes;
// the pod's volumes. Pure: the objects come in (the rendered manifest plus
// whatever the cluster already holds), the plan comes out; running it is
// pod-run.ts's job. A pod the kubelet would refuse (runAsNonRoot with uid
// 0, a missing Secret key) is refused here with the same reason.
import { containerEnv, type EnvSources, type Obj } from './env-vars.ts';
import { containerArgv, type ImageConfig } from './image-config.ts';

export interface Probe {
  kind: 'http' | 'tcp';
  port: number;
  path?: string;
  initialDelaySeconds: number;
  periodSeconds: number;
  failureThreshold: number;
  timeoutSeconds: number;
}

export interface Mount {
  volume: string;
  path: string;
  readOnly: boolean;
}

export interface ContainerPlan {
  name: string;
  init: boolean;
  image: string;
  argv: string[];
  env: Array<[string, string]>;
  workingDir: string;
  uid: number;
  gid: number;
  /** Supplementary groups: fsGroup and supplementalGroups, as the runtime adds them. */
  groups: number[];
  /** allowPrivilegeEscalation false: no_new_privs. */
  noNewPrivs: boolean;
  readOnlyRoot: boolean;
  mounts: Mount[];
  ports: Record<string, number>;
  startupProbe?: Probe;
  readinessProbe?: Probe;
}

export type VolumePlan =
  | { name: string; kind: 'emptyDir'; medium: 'Memory' | ''; sizeLimit?: string }
  | { name: string; kind: 'configMap' | 'secret'; files: Record<string, string> }
  /** A claim the manifest itself declares, simulated as a freshly provisioned empty volume (root-owned, 0755). */
  | { name: string; kind: 'persistentVolumeClaim'; claimName: string };

export interface PodPlan {
  /** The workload's name (Deployment), for logs and errors. */
  name: string;
  fsGroup?: number;
  volumes: VolumePlan[];
  initContainers: ContainerPlan[];
  containers: ContainerPlan[];
  terminationGracePeriodSeconds: number;
}

const num = (v: unknown, dflt: number): number => (v === undefined || v === null ? dflt : Number(v));

function probe(p: Obj | undefined, ports: Record<string, number>, where: string): Probe | undefined {
  if (!p) return undefined;
  const port = (ref: unknown): number => {
    const n = typeof ref === 'number' ? ref : ports[String(ref)];
    if (!n) throw new Error(`${where}: probe port '${String(ref)}' is not a port of the container`);
    return n;
  };
  // Kubernetes' defaults: period 10 s, failure threshold 3, timeout 1 s, no initial delay.
  const common = {
    initialDelaySeconds: num(p.initialDelaySeconds, 0),
    periodSeconds: num(p.periodSeconds, 10),
    failureThreshold: num(p.failureThreshold, 3),
    timeoutSeconds: num(p.timeoutSeconds, 1),
  };
  if (p.httpGet) return { kind: 'http', port: port(p.httpGet.port), path: p.httpGet.path ?? '/', ...common };
  if (p.tcpSocket) return { kind: 'tcp', port: port(p.tcpSocket.port), ...common };
  throw new Error(`${where}: only httpGet and tcpSocket probes are simulated`);
}

/** uid and gid from the container's and the pod's securityContext, else the image's USER (numeric). */
function identity(c: Obj, pod: Obj, image: ImageConfig, where: string): { uid: number; gid: number } {
  const sc = { ...(pod.securityContext ?? {}), ...(c.securityContext ?? {}) };
  const [u, g] = image.user ? image.user.split(':') : ['0'];
  if (sc.runAsUser === undefined && !/^\d+$/.test(u ?? ''))
    throw new Error(`${where}: image user '${image.user}' is a name; only numeric users are simulated`);
  const uid = Number(sc.runAsUser ?? u);
  const gid = Number(sc.runAsGroup ?? (sc.runAsUser === undefined && g !== undefined ? g : 0));
  if (sc.runAsNonRoot && uid === 0) throw new Error(`${where}: container has runAsNonRoot and image will run as root`);
  return { uid, gid };
}

function container(
  c: Obj,
  init: boolean,
  pod: Obj,
  images: Map<string, ImageConfig>,
  sources: EnvSources,
  workload: string,
): ContainerPlan {
  const where = `${workload}: ${init ? 'init container' : 'container'} ${c.name}`;
  const image = images.get(c.image);
  if (!image) throw new Error(`${where}: no image '${c.image}' is known to the simulation`);
  const specEnv = containerEnv(c, [], sources);
  const env = containerEnv(c, image.env, sources);
  const { uid, gid } = identity(c, pod, image, where);
  const sc = { ...(pod.securityContext ?? {}), ...(c.securityContext ?? {}) };
  const groups = [
    ...new Set([
      ...(pod.securityContext?.fsGroup !== undefined ? [Number(pod.securityContext.fsGroup)] : []),
      ...((pod.securityContext?.supplementalGroups ?? []) as number[]),
    ]),
  ];
  const ports = Object.fromEntries(
    ((c.ports ?? []) as Obj[]).filter((p) => p.name).map((p) => [p.name as string, Number(p.containerPort)]),
  );
  const volumes = new Set(((pod.volumes ?? []) as Obj[]).map((v) => v.name as string));
  const mounts = ((c.volumeMounts ?? []) as Obj[]).map((m) => {
    if (!volumes.has(m.name)) throw new Error(`${where}: volumeMount '${m.name}' names no volume of the pod`);
    if (m.subPath) throw new Error(`${where}: volumeMount '${m.name}' uses subPath, which is not simulated`);
    return { volume: m.name as string, path: m.mountPath as string, readOnly: !!m.readOnly };
  });
  return {
    name: c.name,
    init,
    image: c.image,
    argv: containerArgv(image, c.command, c.args, specEnv),
    env: [...env],
    workingDir: c.workingDir || image.workingDir || '/',
    uid,
    gid,
    groups,
    noNewPrivs: sc.allowPrivilegeEscalation === false,
    readOnlyRoot: !!sc.readOnlyRootFilesystem,
    mounts,
    ports,
    startupProbe: probe(c.startupProbe, ports, where),
    readinessProbe: probe(c.readinessProbe, ports, where),
  };
}

function volume(v: Obj, sources: EnvSources, claims: Set<string>, workload: string): VolumePlan {
  if (v.emptyDir)
    return { name: v.name, kind: 'emptyDir', medium: v.emptyDir.medium === 'Memory' ? 'Memory' : '', sizeLimit: v.emptyDir.sizeLimit };
  for (const kind of ['configMap', 'secret'] as const) {
    if (!v[kind]) continue;
    const name = kind === 'configMap' ? v.configMap.name : v.secret.secretName;
    const o = sources.objects.get(`${kind === 'configMap' ? 'ConfigMap' : 'Secret'}/${name}`);
    if (!o) throw new Error(`${workload}: volume ${v.name}: ${kind} '${name}' not found`);
    const data =
      kind === 'configMap'
        ? { ...(o.data ?? {}) }
        : Object.fromEntries(Object.entries({ ...(o.data ?? {}) }).map(([k, x]) => [k, Buffer.from(String(x), 'base64').toString()]));
    if (kind === 'secret') Object.assign(data, o.stringData ?? {});
    return { name: v.name, kind, files: data as Record<string, string> };
  }
  if (v.persistentVolumeClaim) {
    const claimName = v.persistentVolumeClaim.claimName as string;
    if (!claims.has(claimName))
      throw new Error(
        `${workload}: volume ${v.name}: PersistentVolumeClaim '${claimName}' is not in the manifest (only claims it declares are simulated)`,
      );
    return { name: v.name, kind: 'persistentVolumeClaim', claimName };
  }
  throw new Error(
    `${workload}: volume ${v.name}: only emptyDir, configMap, secret and persistentVolumeClaim volumes are simulated (${Object.keys(v)
      .filter((k) => k !== 'name')
      .join(', ')})`,
  );
}

/** Secrets and ConfigMaps of `objects` by Kind/name. */
export function sourceObjects(objects: Obj[]): Map<string, Obj> {
  return new Map(objects.filter((o) => o.kind === 'Secret' || o.kind === 'ConfigMap').map((o) => [`${o.kind}/${o.metadata.name}`, o]));
}

/** The plan of `workload`'s pod template (a Deployment, StatefulSet, ...), with `images` the configs of the images it names. */
export function podPlan(workload: Obj, images: Map<string, ImageConfig>, objects: Obj[], fields: Record<string, string> = {}): PodPlan {
  const name = `${workload.kind}/${workload.metadata.name}`;
  const pod = workload.spec.template.spec as Obj;
  const claims = new Set(objects.filter((o) => o.kind === 'PersistentVolumeClaim').map((o) => o.metadata.name as string));
  const sources: EnvSources = {
    objects: sourceObjects(objects),
    fields: {
      'metadata.name': `${workload.metadata.name}-0`,
      'metadata.namespace': 'default',
      'status.podIP': '127.0.0.1',
      'spec.nodeName': 'node-0',
      'spec.serviceAccountName': pod.serviceAccountName ?? 'default',
      ...fields,
    },
  };
  return {
    name,
    fsGroup: pod.securityContext?.fsGroup,
    volumes: ((pod.volumes ?? []) as Obj[]).map((v) => volume(v, sources, claims, name)),
    initContainers: ((pod.initContainers ?? []) as Obj[]).map((c) => container(c, true, pod, images, sources, name)),
    containers: ((pod.containers ?? []) as Obj[]).map((c) => container(c, false, pod, images, sources, name)),
    terminationGracePeriodSeconds: num(pod.terminationGracePeriodSeconds, 30),
  };
}
