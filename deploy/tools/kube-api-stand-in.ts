// A read-only stand-in for the Kubernetes API server, enough for Helm's
// `lookup` and for `helm template --dry-run=server` (no kube-apiserver can be
// installed where this project is built, FACTS.md): it answers /version,
// the discovery documents (/api, /apis, each group version's resource list)
// for the kinds the chart renders, and GET of the objects it was given, as
// the API server stores them (a Secret's stringData folded into base64
// data); any other object is 404, any write 405. Helm 3 reads the objects a
// template looks up; Helm 4 also reads every object it would install, to
// check it belongs to the release (so stored objects carry Helm's ownership
// labels, as a real install leaves them).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { ensureHelm, type HelmMajor } from './helm-tools.ts';
import { helmArgs, parseManifest, type HelmOptions, type RenderedObject } from './helm-render.ts';

type Obj = Record<string, any>;

/** Kinds the stand-in serves discovery for: group version -> [resource, kind, namespaced]. */
const RESOURCES: Record<string, Array<[string, string, boolean]>> = {
  v1: [
    ['secrets', 'Secret', true],
    ['configmaps', 'ConfigMap', true],
    ['services', 'Service', true],
    ['serviceaccounts', 'ServiceAccount', true],
    ['namespaces', 'Namespace', false],
    ['persistentvolumeclaims', 'PersistentVolumeClaim', true],
  ],
  'apps/v1': [['deployments', 'Deployment', true]],
  'policy/v1': [['poddisruptionbudgets', 'PodDisruptionBudget', true]],
  'autoscaling/v2': [['horizontalpodautoscalers', 'HorizontalPodAutoscaler', true]],
  'networking.k8s.io/v1': [['networkpolicies', 'NetworkPolicy', true]],
  'monitoring.coreos.com/v1': [['servicemonitors', 'ServiceMonitor', true]],
};

const resourceOf = (apiVersion: string, kind: string): string => {
  const r = RESOURCES[apiVersion]?.find(([, k]) => k === kind);
  if (!r) throw new Error(`the stand-in serves no ${apiVersion} ${kind}`);
  return r[0];
};

/** `o` as the API server keeps it after Helm installed it as `release` in `namespace`. */
export function asStored(o: Obj, release: string, namespace = 'default'): Obj {
  const s = structuredClone(o);
  s.metadata.namespace ??= namespace;
  s.metadata.labels = { ...s.metadata.labels, 'app.kubernetes.io/managed-by': 'Helm' };
  s.metadata.annotations = {
    ...s.metadata.annotations,
    'meta.helm.sh/release-name': release,
    'meta.helm.sh/release-namespace': s.metadata.namespace,
  };
  if (s.kind === 'Secret' && s.stringData) {
    s.data = {
      ...s.data,
      ...Object.fromEntries(Object.entries(s.stringData as Record<string, string>).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
    };
    delete s.stringData;
  }
  return s;
}

export class KubeApiStandIn {
  /** Paths of the GETs answered with an object, in order (what Helm looked up). */
  readonly found: string[] = [];
  private readonly objects = new Map<string, Obj>();
  private readonly server: http.Server;
  private dir = '';
  kubeconfig = '';

  private constructor() {
    this.server = http.createServer((req, res) => this.answer(req, res));
  }

  /** Starts on a free loopback port, holding `stored` (objects as the API server keeps them, see asStored). */
  static async start(stored: Obj[]): Promise<KubeApiStandIn> {
    const s = new KubeApiStandIn();
    for (const o of stored) s.put(o);
    await new Promise<void>((r) => s.server.listen(0, '127.0.0.1', r));
    s.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kube-stand-in-'));
    s.kubeconfig = path.join(s.dir, 'kubeconfig');
    const server = `http://127.0.0.1:${(s.server.address() as AddressInfo).port}`;
    fs.writeFileSync(
      s.kubeconfig,
      `apiVersion: v1\nkind: Config\nclusters: [{name: stand-in, cluster: {server: "${server}"}}]\ncontexts: [{name: stand-in, context: {cluster: stand-in, namespace: default}}]\ncurrent-context: stand-in\nusers: [{name: stand-in, user: {}}]\n`,
      { mode: 0o600 },
    );
    return s;
  }

  /** Stores (or replaces) an object. */
  put(o: Obj): void {
    const base = o.apiVersion === 'v1' ? '/api/v1' : `/apis/${o.apiVersion}`;
    this.objects.set(`${base}/namespaces/${o.metadata.namespace ?? 'default'}/${resourceOf(o.apiVersion, o.kind)}/${o.metadata.name}`, o);
  }

  async close(): Promise<void> {
    await new Promise<void>((r) => this.server.close(() => r()));
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  private answer(req: http.IncomingMessage, res: http.ServerResponse): void {
    const send = (code: number, body: unknown) => {
      res.writeHead(code, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const status = (code: number, reason: string) => send(code, { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason, code });
    if (req.method !== 'GET') return status(405, 'MethodNotAllowed');
    const p = new URL(req.url ?? '/', 'http://x').pathname;
    if (p === '/version') return send(200, { major: '1', minor: '33', gitVersion: 'v1.33.0', platform: 'linux/amd64' });
    if (p === '/api')
      return send(200, {
        kind: 'APIVersions',
        versions: ['v1'],
        serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: '127.0.0.1' }],
      });
    if (p === '/apis') {
      const groups = Object.keys(RESOURCES)
        .filter((gv) => gv !== 'v1')
        .map((gv) => {
          const [name, version] = gv.split('/');
          return { name, versions: [{ groupVersion: gv, version }], preferredVersion: { groupVersion: gv, version } };
        });
      return send(200, { kind: 'APIGroupList', apiVersion: 'v1', groups });
    }
    const gv = p === '/api/v1' ? 'v1' : p.replace(/^\/apis\//, '');
    if (RESOURCES[gv]) {
      const resources = RESOURCES[gv]!.map(([name, kind, namespaced]) => ({
        name,
        singularName: kind.toLowerCase(),
        namespaced,
        kind,
        verbs: ['get', 'list'],
      }));
      return send(200, { kind: 'APIResourceList', groupVersion: gv, resources });
    }
    const o = this.objects.get(p);
    if (!o) return status(404, 'NotFound');
    this.found.push(p);
    send(200, o);
  }
}

/**
 * `helm template --dry-run=server` against the stand-in: the chart rendered
 * as `helm upgrade` renders it with those objects in the cluster (lookup
 * answers). Helm 4 would also fetch the OpenAPI document to validate; the
 * stand-in has none, so that step is off (deploy:check validates offline).
 * Asynchronous: the stand-in answers from this process's event loop.
 */
export function helmTemplateAgainst(
  major: HelmMajor,
  chartDir: string,
  api: KubeApiStandIn,
  o: HelmOptions = {},
): Promise<RenderedObject[]> {
  const args = [
    'template',
    o.release ?? 'tritonish',
    chartDir,
    '--dry-run=server',
    '--kubeconfig',
    api.kubeconfig,
    ...(major === 4 ? ['--disable-openapi-validation'] : []),
    ...helmArgs(o),
  ];
  return new Promise((resolve, reject) => {
    execFile(ensureHelm(major), args, { encoding: 'utf8', maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`helm ${major} template --dry-run=server failed: ${(stderr || err.message).trim()}`));
      else resolve(parseManifest(stdout));
    });
  });
}
