// Pod Security Standards (deploy/tools/pod-security.ts), one case per
// control of the standard's Baseline and Restricted tables: a pod meeting
// "restricted" passes, the same pod with one field changed fails naming the
// control. Then the chart's own pods, rendered by Helm 3 and 4, meet
// "restricted" (the dev Redis failed it before issue 39: no seccomp profile).
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { EVERY_OPTIONAL_OBJECT } from '../../deploy/tools/chart-checks.ts';
import { helmTemplate } from '../../deploy/tools/helm-render.ts';
import { ensureHelm } from '../../deploy/tools/helm-tools.ts';
import { CONTROLS, podSecurityViolations } from '../../deploy/tools/pod-security.ts';

type Obj = Record<string, any>;
const ROOT = path.resolve(import.meta.dirname, '../..');
const CHART = path.join(ROOT, 'deploy/helm/tritonish');

const good = (): Obj => ({
  securityContext: { runAsNonRoot: true, runAsUser: 10001, seccompProfile: { type: 'RuntimeDefault' } },
  initContainers: [{ name: 'init', securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } } }],
  containers: [
    {
      name: 'app',
      ports: [{ containerPort: 8080 }],
      securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'], add: ['NET_BIND_SERVICE'] } },
    },
  ],
  volumes: [
    { name: 'tmp', emptyDir: {} },
    { name: 'cfg', configMap: { name: 'x' } },
    { name: 'data', persistentVolumeClaim: { claimName: 'd' } },
  ],
});
const app = (p: Obj): Obj => p.containers[0];
const init = (p: Obj): Obj => p.initContainers[0];

/** Control name -> [level, a change to the good pod that violates it]. */
const CASES: Array<[string, 'baseline' | 'restricted', (p: Obj) => void]> = [
  ['HostProcess', 'baseline', (p) => (app(p).securityContext.windowsOptions = { hostProcess: true })],
  ['Host Namespaces', 'baseline', (p) => (p.hostPID = true)],
  ['Privileged Containers', 'baseline', (p) => (init(p).securityContext.privileged = true)],
  ['Capabilities (baseline)', 'baseline', (p) => (app(p).securityContext.capabilities.add = ['SYS_ADMIN'])],
  ['HostPath Volumes', 'baseline', (p) => p.volumes.push({ name: 'h', hostPath: { path: '/' } })],
  ['Host Ports', 'baseline', (p) => (app(p).ports[0].hostPort = 80)],
  ['AppArmor', 'baseline', (p) => (app(p).securityContext.appArmorProfile = { type: 'Unconfined' })],
  ['SELinux', 'baseline', (p) => (p.securityContext.seLinuxOptions = { type: 'spc_t' })],
  ['/proc Mount Type', 'baseline', (p) => (app(p).securityContext.procMount = 'Unmasked')],
  ['Seccomp (baseline)', 'baseline', (p) => (app(p).securityContext.seccompProfile = { type: 'Unconfined' })],
  ['Sysctls', 'baseline', (p) => (p.securityContext.sysctls = [{ name: 'kernel.msgmax', value: '1' }])],
  ['Volume Types', 'restricted', (p) => p.volumes.push({ name: 'n', nfs: { server: 's', path: '/' } })],
  ['Privilege Escalation', 'restricted', (p) => delete init(p).securityContext.allowPrivilegeEscalation],
  ['Running as Non-root', 'restricted', (p) => delete p.securityContext.runAsNonRoot],
  ['Running as Non-root user', 'restricted', (p) => (app(p).securityContext.runAsUser = 0)],
  ['Seccomp (restricted)', 'restricted', (p) => delete p.securityContext.seccompProfile],
  ['Capabilities (restricted)', 'restricted', (p) => (init(p).securityContext.capabilities.drop = ['NET_RAW'])],
];

describe('Pod Security Standards controls', () => {
  it('the reference pod meets restricted, and every control of the standard has a case', () => {
    expect(podSecurityViolations(good(), 'restricted')).toEqual([]);
    expect(CASES.map(([n]) => n).sort()).toEqual(CONTROLS.map((c) => c.name).sort());
  });

  it.each(CASES)('%s (%s)', (name, level, breakIt) => {
    const p = good();
    breakIt(p);
    const v = podSecurityViolations(p, 'restricted');
    expect(
      v.some((x) => x.startsWith(`${name}: `)),
      v.join('\n'),
    ).toBe(true);
    // Restricted tightens some baseline controls (hostPath is also not a restricted volume type, ...),
    // so a baseline breach may fail two controls there; under baseline alone it fails only its own.
    const b = podSecurityViolations(p, 'baseline');
    if (level === 'baseline') expect(b.every((x) => x.startsWith(`${name}: `)) && b.length > 0, b.join('\n')).toBe(true);
    else expect(b).toEqual([]);
  });

  it('seccomp and runAsNonRoot may be set per container instead of on the pod', () => {
    const p = good();
    delete p.securityContext.seccompProfile;
    delete p.securityContext.runAsNonRoot;
    for (const c of [init(p), app(p)])
      Object.assign(c.securityContext, { seccompProfile: { type: 'Localhost', localhostProfile: 'x.json' }, runAsNonRoot: true });
    expect(podSecurityViolations(p, 'restricted')).toEqual([]);
    app(p).securityContext.runAsNonRoot = false; // a container may not opt out of the pod's setting
    expect(podSecurityViolations(p, 'restricted')).toEqual(['Running as Non-root: container app: runAsNonRoot is false']);
  });
});

describe.each([3, 4] as const)("the chart's pods (Helm %i)", (major) => {
  beforeAll(() => void ensureHelm(major), 300_000);

  it('meet restricted with the default values and with every optional object on', () => {
    for (const set of [[], EVERY_OPTIONAL_OBJECT]) {
      const workloads = helmTemplate(major, CHART, { release: 'tn', set })
        .map((r) => r.object)
        .filter((o) => o.spec?.template?.spec);
      expect(workloads.map((w) => w.metadata.name).sort()).toEqual(['tn-tritonish', 'tn-tritonish-redis']);
      for (const w of workloads) expect(podSecurityViolations(w.spec.template.spec, 'restricted'), w.metadata.name).toEqual([]);
    }
  });

  it('the dev Redis as it was (no seccomp profile) would be refused: the check sees what the fix changed', () => {
    const redis = helmTemplate(major, CHART, { release: 'tn' })
      .map((r) => r.object)
      .find((o) => o.metadata.name === 'tn-tritonish-redis' && o.kind === 'Deployment')!;
    const before = structuredClone(redis.spec.template.spec);
    delete before.securityContext.seccompProfile;
    expect(podSecurityViolations(before, 'restricted')).toEqual([
      'Seccomp (restricted): container redis: seccompProfile.type is unset (RuntimeDefault or Localhost, on the pod or the container)',
    ]);
  });
});
