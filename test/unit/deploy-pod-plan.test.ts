// The pod simulation's reading of a manifest (deploy/tools/pod), without
// running anything: Kubernetes' `$(VAR)` expansion (API reference, "env",
// "command", "args"), how `command`/`args` meet the image's ENTRYPOINT/CMD
// ("Define a Command and Arguments for a Container"), the kubelet's
// environment (valueFrom, optional references, envFrom), a Dockerfile's
// final-stage config (Docker's ENTRYPOINT/CMD rule), and the plan of the
// chart's rendered pod: what each container would run, as whom, with what.
import fs from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { helmTemplate } from '../../deploy/tools/helm-render.ts';
import { ensureHelm } from '../../deploy/tools/helm-tools.ts';
import { containerEnv, expandReferences } from '../../deploy/tools/pod/env-vars.ts';
import { containerArgv, DEBIAN_BASE_CONFIG, dockerfileImageConfig, type ImageConfig } from '../../deploy/tools/pod/image-config.ts';
import { podPlan } from '../../deploy/tools/pod/pod-plan.ts';
import { quantityBytes } from '../../deploy/tools/pod/pod-run.ts';

type Obj = Record<string, any>;
const ROOT = path.resolve(import.meta.dirname, '../..');
const DOCKERFILE = fs.readFileSync(path.join(ROOT, 'deploy/Dockerfile'), 'utf8');

describe('$(VAR) expansion', () => {
  const vars: Record<string, string> = { A: 'a', EMPTY: '', B: 'x$(A)' };
  const x = (s: string) => expandReferences(s, (n) => vars[n]);
  it.each([
    ['$(A)', 'a'],
    ['pre-$(A)-post', 'pre-a-post'],
    ['$(EMPTY)', ''],
    ['$(UNDEFINED) stays', '$(UNDEFINED) stays'],
    ['$$(A) is escaped', '$(A) is escaped'],
    ['$$ alone', '$ alone'],
    ['$A is not a reference', '$A is not a reference'],
    ['$( never closed', '$( never closed'],
    ['trailing $', 'trailing $'],
    ['$(B) is not expanded twice', 'x$(A) is not expanded twice'],
    ['$(A)$(A)', 'aa'],
  ])('%s', (input, want) => expect(x(input)).toBe(want));
});

describe('command and args against the image (Kubernetes "Define a Command and Arguments for a Container")', () => {
  const image: ImageConfig = { entrypoint: ['/usr/bin/tini', '--'], cmd: ['node', 'start.js'], user: '', workingDir: '/app', env: [] };
  const env = new Map([['PORT', '8080']]);
  it.each([
    ['neither: ENTRYPOINT + CMD', undefined, undefined, ['/usr/bin/tini', '--', 'node', 'start.js']],
    ['args only: ENTRYPOINT + args', undefined, ['tritonserver', '--port=$(PORT)'], ['/usr/bin/tini', '--', 'tritonserver', '--port=8080']],
    ['command only: command, CMD dropped', ['sh', '-c'], undefined, ['sh', '-c']],
    ['both: command + args, ENTRYPOINT dropped', ['node'], ['x.js'], ['node', 'x.js']],
  ])('%s', (_l, command, args, want) => expect(containerArgv(image, command, args, env)).toEqual(want));

  it('no command at all is an error', () => {
    expect(() => containerArgv({ ...image, entrypoint: [], cmd: [] }, undefined, undefined, env)).toThrow(/no command/);
  });
});

describe('the environment the kubelet gives a container', () => {
  const secret = {
    kind: 'Secret',
    metadata: { name: 's' },
    data: { k: Buffer.from('from-data').toString('base64') },
    stringData: { t: 'tok' },
  };
  const cm = { kind: 'ConfigMap', metadata: { name: 'c' }, data: { mode: 'fast' } };
  const sources = {
    objects: new Map<string, Obj>([
      ['Secret/s', secret],
      ['ConfigMap/c', cm],
    ]),
    fields: { 'metadata.name': 'pod-0' },
  };

  it('image env first; envFrom with prefix; env in order, $(VAR) seeing earlier entries only, never the image env', () => {
    const c = {
      name: 'x',
      envFrom: [{ configMapRef: { name: 'c' }, prefix: 'C_' }],
      env: [
        { name: 'KEY', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } },
        { name: 'HEADER', value: 'key=$(KEY) mode=$(C_MODE) later=$(LATER) path=$(PATH)' },
        { name: 'LATER', value: 'l' },
        { name: 'POD', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
        { name: 'TOKEN', valueFrom: { secretKeyRef: { name: 's', key: 't' } } },
        { name: 'PATH', value: '/opt/bin' },
      ],
    };
    const env = containerEnv(c, ['PATH=/usr/bin', 'NODE_ENV=production'], sources);
    expect(Object.fromEntries(env)).toEqual({
      PATH: '/opt/bin',
      NODE_ENV: 'production',
      C_mode: 'fast',
      KEY: 'from-data',
      HEADER: 'key=from-data mode=$(C_MODE) later=$(LATER) path=$(PATH)',
      LATER: 'l',
      POD: 'pod-0',
      TOKEN: 'tok',
    });
  });

  it('a missing Secret or key fails the container unless the reference is optional, which leaves the variable unset', () => {
    const ref = (name: string, key: string, optional?: boolean) => ({
      name: 'x',
      env: [{ name: 'V', valueFrom: { secretKeyRef: { name, key, optional } } }],
    });
    expect(() => containerEnv(ref('nope', 'k'), [], sources)).toThrow("container x: env V: Secret 'nope' not found");
    expect(() => containerEnv(ref('s', 'nope'), [], sources)).toThrow("container x: env V: Secret 's' has no key 'nope'");
    expect(containerEnv(ref('nope', 'k', true), [], sources).has('V')).toBe(false);
    expect(containerEnv(ref('s', 'nope', true), [], sources).has('V')).toBe(false);
  });
});

describe('Dockerfile final-stage configuration', () => {
  it('deploy/Dockerfile: tini as ENTRYPOINT, the supervisor as CMD, uid 10001, /app, production Node', () => {
    const c = dockerfileImageConfig(DOCKERFILE, DEBIAN_BASE_CONFIG);
    expect(c.entrypoint).toEqual(['/usr/bin/tini', '--']);
    expect(c.cmd).toEqual(['node', 'dist/scripts/start.js']);
    expect(c.user).toBe('10001:10001');
    expect(c.workingDir).toBe('/app');
    expect(c.env).toEqual(['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', 'NODE_ENV=production']);
  });

  it('an ENTRYPOINT clears the CMD inherited from the base, not one set in the same stage; shell forms run under /bin/sh -c', () => {
    const base = { ...DEBIAN_BASE_CONFIG };
    expect(dockerfileImageConfig('FROM x\nENTRYPOINT ["e"]\n', base).cmd).toEqual([]);
    expect(dockerfileImageConfig('FROM x\nCMD ["c"]\nENTRYPOINT ["e"]\n', base).cmd).toEqual(['c']);
    const shell = dockerfileImageConfig(
      'FROM a AS b\nUSER 1\nFROM x\nENTRYPOINT run \\\n  --flag\nENV A=1 B="two words"\nENV C 3\nWORKDIR /w\nWORKDIR sub\n',
      base,
    );
    expect(shell).toMatchObject({ entrypoint: ['/bin/sh', '-c', 'run   --flag'], user: '', workingDir: '/w/sub' });
    expect(shell.env.slice(1)).toEqual(['A=1', 'B=two words', 'C=3']);
  });

  it('quantities', () => {
    expect([quantityBytes('1Gi'), quantityBytes('512Mi'), quantityBytes('1G'), quantityBytes(1000)]).toEqual([2 ** 30, 2 ** 29, 1e9, 1000]);
    expect(() => quantityBytes('lots')).toThrow("'lots' is not a quantity");
  });
});

describe("the plan of the chart's pod (Helm 3 render, default values)", () => {
  let objects: Obj[];
  const app = (): ImageConfig => dockerfileImageConfig(DOCKERFILE, DEBIAN_BASE_CONFIG);
  const server = () => objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'tritonish')!;
  beforeAll(() => {
    ensureHelm(3);
    objects = helmTemplate(3, path.join(ROOT, 'deploy/helm/tritonish'), { release: 'tritonish' }).map((r) => r.object);
  }, 300_000);

  it('the init copy first, then engine and gateway under tini, uid 10001 with fsGroup, no privilege escalation, read-only roots', () => {
    const image = server().spec.template.spec.containers[0].image;
    const plan = podPlan(server(), new Map([[image, app()]]), objects);
    expect(plan.initContainers.map((c) => c.argv)).toEqual([['sh', '-c', 'cp -R /app/model_repository/. /models/']]);
    expect(plan.containers.map((c) => c.argv.slice(0, 3))).toEqual([
      ['/usr/bin/tini', '--', 'tritonserver'],
      ['/usr/bin/tini', '--', 'node'],
    ]);
    for (const c of [...plan.initContainers, ...plan.containers]) {
      expect(c).toMatchObject({ uid: 10001, gid: 10001, groups: [10001], noNewPrivs: true, readOnlyRoot: true, workingDir: '/app' });
    }
    expect(plan.volumes.find((v) => v.name === 'shm')).toEqual({ name: 'shm', kind: 'emptyDir', medium: 'Memory', sizeLimit: '1Gi' });
    const engine = plan.containers[0]!;
    expect(engine.readinessProbe).toMatchObject({ kind: 'http', port: 8000, path: '/v2/health/ready', periodSeconds: 5 });
    expect(engine.startupProbe).toMatchObject({ periodSeconds: 5, failureThreshold: 60 });
    // The Secret's key reaches both containers, expanded into the engine's restricted-API flags.
    const key = objects.find((o) => o.kind === 'Secret')!.stringData['engine-admin-key'];
    const env = (i: number) => Object.fromEntries(plan.containers[i]!.env);
    expect(env(0).ENGINE_HTTP_RESTRICTED_API).toBe(`model-repository,trace,logging,shared-memory:triton-grpc-protocol-admin-key=${key}`);
    expect(env(1).GATEWAY_ENGINE_KEY).toBe(`triton-grpc-protocol-admin-key=${key}`);
    expect(env(1).NODE_ENV).toBe('production');
  });

  it('refuses what the kubelet refuses: root under runAsNonRoot, a Secret that is not there', () => {
    const image = server().spec.template.spec.containers[0].image;
    const root = structuredClone(server());
    root.spec.template.spec.containers[1].securityContext.runAsUser = 0;
    expect(() => podPlan(root, new Map([[image, app()]]), objects)).toThrow(
      'Deployment/tritonish: container gateway: container has runAsNonRoot and image will run as root',
    );
    const noSecret = objects.filter((o) => o.kind !== 'Secret');
    expect(() => podPlan(server(), new Map([[image, app()]]), noSecret)).toThrow(
      "container engine: env TRITONISH_ENGINE_ADMIN_KEY: Secret 'tritonish-secrets' not found",
    );
    expect(() => podPlan(server(), new Map(), objects)).toThrow(`no image '${image}' is known to the simulation`);
  });

  it('the dev Redis keeps its data on the claim the chart declares; a claim the manifest lacks is refused by name', () => {
    const redis = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'tritonish-redis')!;
    const image = redis.spec.template.spec.containers[0].image;
    const redisImage: ImageConfig = { ...app(), entrypoint: [], cmd: ['redis-server'], user: '999' };
    const plan = podPlan(redis, new Map([[image, redisImage]]), objects);
    const claim = redis.spec.template.spec.volumes.find((v: Obj) => v.persistentVolumeClaim).persistentVolumeClaim.claimName;
    expect(plan.volumes).toContainEqual({ name: 'data', kind: 'persistentVolumeClaim', claimName: claim });
    const noClaim = objects.filter((o) => o.kind !== 'PersistentVolumeClaim');
    expect(() => podPlan(redis, new Map([[image, redisImage]]), noClaim)).toThrow(
      `Deployment/tritonish-redis: volume data: PersistentVolumeClaim '${claim}' is not in the manifest`,
    );
  });
});
