// What a platform team expects of the chart beyond its pod (issue 39),
// rendered by the real Helm 3 and Helm 4: the image's tini kept as PID 1
// (args, never command), an init copy that does not try to set the
// emptyDir's own times, a ServiceAccount without a token, NetworkPolicies
// (the engine's Triton ports closed to the cluster unless named), optional
// ServiceMonitors valid against the operator's schema, topology spread, pods
// rolled by a checksum when what they read changes, the autoscaler's CPU
// fallback, and no GPU request the image cannot serve.
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { EVERY_OPTIONAL_OBJECT, EVERY_OPTIONAL_OBJECT_JSON, validateObject } from '../../deploy/tools/chart-checks.ts';
import { helmTemplate, type HelmOptions, type RenderedObject } from '../../deploy/tools/helm-render.ts';
import { ensureHelm, type HelmMajor } from '../../deploy/tools/helm-tools.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const CHART = path.join(ROOT, 'deploy/helm/tritonish');
const PROD = path.join(ROOT, 'deploy/helm/values-production.yaml');
const GPU = path.join(ROOT, 'deploy/helm/values-gpu.yaml');
type Obj = Record<string, any>;

const objects = (major: HelmMajor, o: HelmOptions = {}): Obj[] =>
  helmTemplate(major, CHART, { release: 'tn', ...o }).map((r: RenderedObject) => r.object);
const all = (objs: Obj[], kind: string): Obj[] => objs.filter((o) => o.kind === kind);
const server = (objs: Obj[]): Obj => objs.find((o) => o.kind === 'Deployment' && o.metadata.name === 'tn-tritonish')!;
const everyOptional: HelmOptions = { set: EVERY_OPTIONAL_OBJECT, extra: EVERY_OPTIONAL_OBJECT_JSON.flatMap((j) => ['--set-json', j]) };

beforeAll(() => {
  ensureHelm(3);
  ensureHelm(4);
}, 300_000);

describe.each([3, 4] as const)('Helm %i', (major) => {
  it("no container replaces the image's ENTRYPOINT (tini stays PID 1), except the init copy, which runs a shell", () => {
    for (const o of [...objects(major), ...objects(major, { values: [PROD] })].filter((x) => x.kind === 'Deployment')) {
      const pod = o.spec.template.spec;
      for (const c of pod.containers) expect(c.command, `${o.metadata.name}/${c.name}`).toBeUndefined();
      for (const c of pod.initContainers ?? []) expect(c.command).toEqual(['sh', '-c']);
    }
    const init = server(objects(major)).spec.template.spec.initContainers[0];
    expect(init.args).toEqual(['cp -R /app/model_repository/. /models/']);
    expect(init.resources).toEqual({ requests: { cpu: '100m', memory: '64Mi' }, limits: { memory: '256Mi' } });
  });

  it('one ServiceAccount, and no pod mounts an API token', () => {
    const objs = objects(major);
    const [sa] = all(objs, 'ServiceAccount');
    expect(sa).toMatchObject({ metadata: { name: 'tn-tritonish' }, automountServiceAccountToken: false });
    for (const d of all(objs, 'Deployment')) {
      expect(d.spec.template.spec.serviceAccountName).toBe('tn-tritonish');
      expect(d.spec.template.spec.automountServiceAccountToken).toBe(false);
    }
    const external = objects(major, { set: ['serviceAccount.create=false', 'serviceAccount.name=ml-runner'] });
    expect(all(external, 'ServiceAccount')).toEqual([]);
    expect(server(external).spec.template.spec.serviceAccountName).toBe('ml-runner');
  });

  it("NetworkPolicy: the gateway's port open, the engine's Triton ports to no one by default, metrics to the cluster; Redis to the server pods", () => {
    const objs = objects(major);
    const [pol, redis] = all(objs, 'NetworkPolicy');
    const pod = server(objs).spec.template.spec;
    expect(pol.spec.podSelector.matchLabels).toEqual(server(objs).spec.selector.matchLabels);
    expect(pol.spec.policyTypes).toEqual(['Ingress']);
    const byPort = Object.fromEntries(pol.spec.ingress.map((r: Obj) => [r.ports.map((p: Obj) => p.port).join(','), r.from]));
    expect(byPort).toEqual({ http: undefined, metrics: [{ namespaceSelector: {} }] });
    // Every port a rule names is a named port of the server pod.
    const named = pod.containers.flatMap((c: Obj) => c.ports.map((p: Obj) => p.name));
    for (const r of pol.spec.ingress) for (const p of r.ports) expect(named).toContain(p.port);
    expect(redis.spec.ingress).toEqual([
      { ports: [{ port: 'redis', protocol: 'TCP' }], from: [{ podSelector: { matchLabels: server(objs).spec.selector.matchLabels } }] },
    ]);
    // Named namespaces and peers open the engine's ports to them only.
    const open = all(objects(major, everyOptional), 'NetworkPolicy')[0]!;
    const engineRule = open.spec.ingress.find((r: Obj) => r.ports.some((p: Obj) => p.port === 'engine-grpc'));
    expect(engineRule.ports.map((p: Obj) => p.port)).toEqual(['engine-grpc', 'engine-http']);
    expect(engineRule.from).toEqual([
      { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ml-batch' } } },
      { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ml-online' } } },
      { podSelector: { matchLabels: { role: 'triton-client' } } },
    ]);
    expect(open.spec.ingress[0].from).toEqual([{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } }]);
    expect(all(objects(major, { set: ['networkPolicy.enabled=false'] }), 'NetworkPolicy')).toEqual([]);
  });

  it("ServiceMonitors (off by default): one per Service, on a port that Service has, valid against the operator's schema", () => {
    expect(all(objects(major), 'ServiceMonitor')).toEqual([]);
    const objs = objects(major, everyOptional);
    const monitors = all(objs, 'ServiceMonitor');
    expect(monitors.map((m) => m.metadata.name)).toEqual(['tn-tritonish-engine', 'tn-tritonish']);
    for (const m of monitors) {
      expect(validateObject(m)).toEqual([]);
      expect(m.metadata.labels.release).toBe('kube-prometheus-stack');
      const svcs = all(objs, 'Service').filter((s) =>
        Object.entries(m.spec.selector.matchLabels).every(([k, v]) => s.metadata.labels[k] === v),
      );
      expect(svcs).toHaveLength(1);
      expect(svcs[0]!.spec.ports.map((p: Obj) => p.name)).toContain(m.spec.endpoints[0].port);
    }
    // The schema refuses what the operator's CRD would: a misspelt field, a bad duration.
    const bad = structuredClone(monitors[0]!);
    bad.spec.endpoints[0].intervall = '30s';
    bad.spec.endpoints[0].scrapeTimeout = '10 seconds';
    expect(validateObject(bad)).toEqual([
      expect.stringMatching(/^ServiceMonitor\/tn-tritonish-engine: spec\.endpoints\[0\]\.scrapeTimeout: '10 seconds' does not match/),
      "ServiceMonitor/tn-tritonish-engine: spec.endpoints[0]: unknown field 'intervall'",
    ]);
  });

  it('topology spread over nodes and zones selects the server pods', () => {
    const d = server(objects(major));
    const spread = d.spec.template.spec.topologySpreadConstraints;
    expect(spread.map((s: Obj) => s.topologyKey)).toEqual(['kubernetes.io/hostname', 'topology.kubernetes.io/zone']);
    for (const s of spread) {
      expect(s).toMatchObject({ maxSkew: 1, whenUnsatisfiable: 'ScheduleAnyway' });
      expect(s.labelSelector.matchLabels).toEqual(d.spec.template.metadata.labels);
    }
  });

  it('the checksum annotation follows what the pods read: the Secret data and the function bundle', () => {
    const sum = (o: HelmOptions) => server(objects(major, o)).spec.template.metadata.annotations;
    const base = { set: ['secrets.engineAdminKey=k1'] };
    expect(sum(base)['checksum/secrets']).toBe(sum(base)['checksum/secrets']);
    expect(sum({ set: ['secrets.engineAdminKey=k2'] })['checksum/secrets']).not.toBe(sum(base)['checksum/secrets']);
    expect(sum({ set: ['secrets.engineAdminKey=k1', 'secrets.adminToken=t'] })['checksum/secrets']).not.toBe(sum(base)['checksum/secrets']);
    expect(sum(base)['checksum/functions']).toBeUndefined();
    const withFns = (fn: string) =>
      sum({ ...base, extra: ['--set-json', `functions.files={"a.json":${JSON.stringify(fn)}}`] })['checksum/functions'];
    expect(withFns('{"name":"a"}')).toMatch(/^[0-9a-f]{64}$/);
    expect(withFns('{"name":"a"}')).not.toBe(withFns('{"name":"b"}'));
  });

  it('the autoscaler: queue time and CPU by default, either alone, never neither', () => {
    const metrics = (set: string[]) =>
      all(objects(major, { set: ['autoscaling.enabled=true', ...set] }), 'HorizontalPodAutoscaler')[0]!.spec.metrics;
    expect(metrics([]).map((m: Obj) => m.type)).toEqual(['Pods', 'Resource']);
    expect(metrics([])[1].resource).toEqual({ name: 'cpu', target: { type: 'Utilization', averageUtilization: 80 } });
    expect(metrics(['autoscaling.metricName=']).map((m: Obj) => m.type)).toEqual(['Resource']);
    expect(metrics(['autoscaling.targetCPUUtilizationPercentage=0']).map((m: Obj) => m.type)).toEqual(['Pods']);
    expect(() =>
      objects(major, { set: ['autoscaling.enabled=true', 'autoscaling.metricName=', 'autoscaling.targetCPUUtilizationPercentage=0'] }),
    ).toThrow(/autoscaling.enabled needs a metric/);
    // CPU utilisation is a share of requests: every container of the pod requests CPU.
    for (const c of server(objects(major)).spec.template.spec.containers) expect(c.resources.requests.cpu).toBeDefined();
  });

  it('a GPU request renders only with the GPU image variant (image.cuda)', () => {
    expect(() => objects(major, { set: ['engine.resources.limits.nvidia\\.com/gpu=1'] })).toThrow(
      /engine\.resources\.limits asks for nvidia\.com\/gpu, but image\.cuda is false: the default image has no CUDA libraries/,
    );
    const d = server(objects(major, { values: [PROD, GPU] }));
    expect(d.spec.template.spec.containers[0].resources.limits['nvidia.com/gpu']).toBe('1');
    expect(d.spec.template.spec.containers[0].image).toBe('registry.example.com/ml/tritonish:0.1.0-cuda12');
    expect(d.spec.template.spec.nodeSelector).toEqual({ 'nvidia.com/gpu.present': 'true' });
  });
});
