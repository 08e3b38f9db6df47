// Values that trip a chart, rendered by the real Helm 3 and Helm 4: long
// names (Kubernetes names hold 63 characters), large numbers (Helm 4, and
// Helm 3 from 1,000,000 up, print an unpiped number as 3.3554432e+07), and
// strings that YAML 1.1 (the API server's reader) takes for booleans (`yes`,
// `on`, `off`, `y`). Also the values schema refusing a mistyped value, and
// the docs' `helm install` lines that `npm run deploy:check` renders.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { documentedInstalls, shellWords } from '../../deploy/tools/documented-installs.ts';
import { helmTemplate, type RenderedObject } from '../../deploy/tools/helm-render.ts';
import { ensureHelm, helmPath } from '../../deploy/tools/helm-tools.ts';
import { validateK8sObject } from '../../deploy/tools/k8s-validate.ts';
import { execFileSync } from 'node:child_process';

const ROOT = path.resolve(import.meta.dirname, '../..');
const CHART = path.join(ROOT, 'deploy/helm/tritonish');
type Obj = Record<string, any>;

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'chart-values-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
const valuesFile = (name: string, v: Obj): string => {
  const f = path.join(tmp, name);
  fs.writeFileSync(f, stringify(v, { version: '1.1' })); // 1.1: quotes `on`, as Helm reads values the 1.1 way
  return f;
};
const byKind = (objs: RenderedObject[], kind: string): Obj[] => objs.map((o) => o.object).filter((o) => o.kind === kind);

beforeAll(() => {
  ensureHelm(3);
  ensureHelm(4);
}, 300_000);

describe.each([3, 4] as const)('Helm %i', (major) => {
  it('names stay within 63 characters and valid DNS labels with the longest release name and a 63-character fullnameOverride', () => {
    const release = `r${'x'.repeat(52)}`; // Helm's longest release name: 53 characters
    for (const set of [[], [`fullnameOverride=${'f'.repeat(63)}`]]) {
      const objs = helmTemplate(major, CHART, { release, set });
      const names = objs.map((o) => `${o.object.kind}/${o.object.metadata.name}`);
      expect(new Set(names).size).toBe(names.length);
      for (const o of objs) {
        expect(o.object.metadata.name, `${o.object.kind}`).toMatch(/^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/);
        for (const v of Object.values(o.object.metadata.labels ?? {})) expect(String(v).length).toBeLessThanOrEqual(63);
        expect(validateK8sObject(o.object)).toEqual([]);
      }
    }
  });

  it('numbers of a million and more reach flags and fields as integers', () => {
    const big = valuesFile(`big-${major}.yaml`, {
      terminationGracePeriodSeconds: 1_000_000,
      engine: { grpcPort: 18001, logVerbose: 2, preStopSleepSeconds: 1_000_000, startupFailureThreshold: 1_000_000 },
      gateway: {
        shmThreshold: 1_048_576,
        arenaRegionBytes: 33_554_432,
        leaseTtlMs: 10_000_000,
        jobClaimIdleMs: 3_600_000,
        drainMs: 25_000_000,
        preStopSleepSeconds: 2_000_000,
        resources: { requests: { memory: 17_179_869_184 } },
      },
      shm: { sizeLimit: 4_294_967_296 },
      autoscaling: { enabled: true, targetAverageQueueMicroseconds: 20_000_000, scaleDownStabilizationSeconds: 3_000_000 },
      // Given, not generated: a random 48-character key holds something like "6e5" about once in 25 renders.
      secrets: { engineAdminKey: 'chart-values-test-admin-key' },
    });
    const text = execFileSync(helmPath(major), ['template', 'tn', CHART, '-f', big], { encoding: 'utf8' });
    expect(text.match(/\d(\.\d+)?e[+-]?\d+/g) ?? []).toEqual([]);
    const objs = helmTemplate(major, CHART, { release: 'tn', values: [big] });
    for (const o of objs) expect(validateK8sObject(o.object)).toEqual([]);
    const d = byKind(objs, 'Deployment').find((x) => x.metadata.name === 'tn-tritonish')!;
    const [engine, gateway] = d.spec.template.spec.containers;
    expect(gateway.args).toEqual(
      expect.arrayContaining([
        '--engine=127.0.0.1:18001',
        '--shm-threshold=1048576',
        '--arena-region-bytes=33554432',
        '--lease-ttl-ms=10000000',
        '--job-claim-idle-ms=3600000',
        '--drain-ms=25000000',
      ]),
    );
    expect(engine.args).toEqual(expect.arrayContaining(['--grpc-port=18001', '--log-verbose=2']));
    expect(engine.lifecycle.preStop.exec.command).toEqual(['sleep', '1000000']);
    expect(engine.startupProbe.failureThreshold).toBe(1_000_000);
    expect(d.spec.template.spec.terminationGracePeriodSeconds).toBe(1_000_000);
    expect(d.spec.template.spec.volumes.find((v: Obj) => v.name === 'shm').emptyDir.sizeLimit).toBe('4294967296');
    expect(gateway.resources.requests.memory).toBe(17_179_869_184);
    const hpa = byKind(objs, 'HorizontalPodAutoscaler')[0]!;
    expect(hpa.spec.metrics[0].pods.target.averageValue).toBe('20000000');
    expect(hpa.spec.behavior.scaleDown.stabilizationWindowSeconds).toBe(3_000_000);
  });

  it('strings YAML 1.1 reads as booleans stay strings (read back with YAML 1.1, as Kubernetes reads them)', () => {
    const words = valuesFile(`words-${major}.yaml`, {
      image: { repository: 'on', tag: 'yes' },
      modelRepository: { existingClaim: 'y' },
      redis: { urlSecret: { name: 'yes', key: 'on' } },
      secrets: { existingSecret: 'off', adminToken: 'no', webhookSecret: 'n' },
      autoscaling: { enabled: true, metricName: 'off', targetAverageQueueMicroseconds: 'on' },
      service: { annotations: { 'example.com/flag': 'on' } },
      podAnnotations: { 'example.com/y': 'y' },
      nodeSelector: { 'example.com/gpu': 'yes' },
      functions: { files: { 'off.json': 'no' } },
      gateway: { extraEnv: [{ name: 'FLAG', value: 'off' }] },
      podDisruptionBudget: { maxUnavailable: 'yes' },
    });
    // A release name "on" makes the instance label "on"; fullnameOverride "yes" names every object.
    const objs = helmTemplate(major, CHART, { release: 'on', values: [words], set: ['fullnameOverride=yes'] });
    const d = byKind(objs, 'Deployment').find((x) => x.metadata.name === 'yes')!;
    const pod = d.spec.template.spec;
    const gw = pod.containers[1];
    expect(d.metadata.labels['app.kubernetes.io/instance']).toBe('on');
    expect(pod.containers[0].image).toBe('on:yes');
    expect(pod.volumes.find((v: Obj) => v.name === 'models').persistentVolumeClaim.claimName).toBe('y');
    expect(gw.env.find((e: Obj) => e.name === 'REDIS_URL').valueFrom.secretKeyRef).toEqual({ name: 'yes', key: 'on' });
    expect(gw.env.find((e: Obj) => e.name === 'GATEWAY_ADMIN_TOKEN').valueFrom.secretKeyRef.name).toBe('off');
    expect(gw.env.find((e: Obj) => e.name === 'FLAG').value).toBe('off');
    expect(d.spec.template.metadata.annotations['example.com/y']).toBe('y');
    expect(pod.nodeSelector).toEqual({ 'example.com/gpu': 'yes' });
    const hpa = byKind(objs, 'HorizontalPodAutoscaler')[0]!;
    expect(hpa.spec.metrics[0].pods.metric.name).toBe('off');
    expect(byKind(objs, 'Service').find((s) => s.metadata.name === 'yes')!.metadata.annotations['example.com/flag']).toBe('on');
    expect(byKind(objs, 'ConfigMap')[0]!.data).toEqual({ 'off.json': 'no' });
    expect(byKind(objs, 'PodDisruptionBudget')[0]!.spec.maxUnavailable).toBe('yes');
    // Every field the API server types as a string got a string.
    for (const o of objs) {
      if (o.object.kind === 'HorizontalPodAutoscaler' || o.object.kind === 'PodDisruptionBudget') continue; // "on" is no quantity, "yes" no percentage: types only
      expect(validateK8sObject(o.object), `${o.object.kind}/${o.object.metadata.name}`).toEqual([]);
    }
  });

  it('the values schema refuses a mistyped or misspelt value, naming it', () => {
    const fail = (set: string[]) => {
      try {
        helmTemplate(major, CHART, { set });
        return '';
      } catch (e) {
        return (e as Error).message;
      }
    };
    expect(fail(['engine.grpcPort=abc'])).toMatch(/engine[./]grpcPort/);
    expect(fail(['gateway.drainMS=1'])).toMatch(/drainMS/);
    expect(fail(['image.pullPolicy=Sometimes'])).toMatch(/pullPolicy/);
  });
});

describe('documented helm installs', () => {
  it('splits shell words as a shell would, with command substitutions filled in', () => {
    expect(shellWords(`helm install tn deploy/helm/tritonish --set a='x y' --set "b=c d" --set t=$(openssl rand -hex 24) # note`)).toEqual([
      'helm',
      'install',
      'tn',
      'deploy/helm/tritonish',
      '--set',
      'a=x y',
      '--set',
      'b=c d',
      '--set',
      `t=${'a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d2e3f4'}`,
    ]);
  });

  it('finds every helm install of our chart in the docs, continuation lines joined, other charts left out', () => {
    const dir = fs.mkdtempSync(path.join(tmp, 'docs-'));
    fs.writeFileSync(
      path.join(dir, 'x.md'),
      [
        'text',
        '```bash',
        'helm install tn deploy/helm/tritonish \\',
        '  --set image.tag=1.2.3',
        'helm install pa prometheus-community/prometheus-adapter -f x',
        'helm upgrade --install tritonish deploy/helm/tritonish -f v.yaml',
        '```',
        'helm install outside deploy/helm/tritonish',
      ].join('\n'),
    );
    expect(documentedInstalls(dir, ['x.md'])).toEqual([
      { where: 'x.md:3', release: 'tn', args: ['--set', 'image.tag=1.2.3'] },
      { where: 'x.md:6', release: 'tritonish', args: ['-f', 'v.yaml'] },
    ]);
    // The deploy guide has some, and deploy:check renders them.
    expect(documentedInstalls(ROOT, ['docs/deploy/kubernetes.md']).length).toBeGreaterThanOrEqual(2);
  });
});
