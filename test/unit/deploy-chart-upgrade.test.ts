// The engine admin key survives upgrades (issue 39): rendered by the real
// Helm 3 and Helm 4, once as `helm install` (no cluster) and again as
// `helm upgrade` against the API stand-in holding what the install made
// (Helm's lookup answering, deploy/tools/kube-api-stand-in.ts). The key is
// never redrawn by a render: kept when the Secret exists, taken from the
// values when given (a rotation, which rolls the pods), read from an
// existing Secret the chart does not own. A chart that redraws the key
// (the pre-issue behaviour) is caught by the same check.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { helmTemplate, type HelmOptions } from '../../deploy/tools/helm-render.ts';
import { ensureHelm, type HelmMajor } from '../../deploy/tools/helm-tools.ts';
import { asStored, helmTemplateAgainst, KubeApiStandIn } from '../../deploy/tools/kube-api-stand-in.ts';
import { upgradeDifferences } from '../../deploy/tools/upgrade-check.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const CHART = path.join(ROOT, 'deploy/helm/tritonish');
type Obj = Record<string, any>;

const offline = (major: HelmMajor, o: HelmOptions = {}): Obj[] => helmTemplate(major, CHART, { release: 'tn', ...o }).map((r) => r.object);
const secretOf = (objs: Obj[]): Obj | undefined => objs.find((o) => o.kind === 'Secret');
const checksum = (objs: Obj[]): string =>
  objs.find((o) => o.kind === 'Deployment' && o.metadata.name === 'tn-tritonish')!.spec.template.metadata.annotations['checksum/secrets'];
const keyOf = (objs: Obj[]): string => secretOf(objs)!.stringData['engine-admin-key'];

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'chart-upgrade-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

beforeAll(() => {
  ensureHelm(3);
  ensureHelm(4);
}, 300_000);

describe.each([3, 4] as const)('Helm %i', (major) => {
  it('install, then upgrade twice: every object the same, the generated key kept, the stand-in asked for the Secret', async () => {
    const installed = offline(major);
    expect(keyOf(installed)).toMatch(/^[A-Za-z0-9]{48}$/);
    const api = await KubeApiStandIn.start(installed.map((o) => asStored(o, 'tn')));
    try {
      const first = (await helmTemplateAgainst(major, CHART, api, { release: 'tn' })).map((r) => r.object);
      const second = (await helmTemplateAgainst(major, CHART, api, { release: 'tn' })).map((r) => r.object);
      expect(first).toEqual(installed);
      expect(second).toEqual(installed);
      expect(api.found).toContain('/api/v1/namespaces/default/secrets/tn-tritonish-secrets');
      // A value given on upgrade is a rotation: the Secret takes it and the pods roll.
      const rotated = (await helmTemplateAgainst(major, CHART, api, { release: 'tn', set: ['secrets.engineAdminKey=rotated-key'] })).map(
        (r) => r.object,
      );
      expect(keyOf(rotated)).toBe('rotated-key');
      expect(checksum(rotated)).not.toBe(checksum(installed));
    } finally {
      await api.close();
    }
  });

  it('a key given in the values renders the same every time, with or without a cluster', () => {
    const set = ['secrets.engineAdminKey=given-key-0123'];
    const [a, b] = [offline(major, { set }), offline(major, { set })];
    expect(a).toEqual(b);
    expect(keyOf(a)).toBe('given-key-0123');
    // Without one and without a cluster (helm template, GitOps), each render draws a key: docs/deploy/kubernetes.md says to give one.
    expect(keyOf(offline(major))).not.toBe(keyOf(offline(major)));
  });

  it("an existing Secret the chart does not own: no Secret rendered, the pods' checksum follows its data", async () => {
    const mine = (key: string): Obj => ({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'mine', namespace: 'default' },
      data: { 'engine-admin-key': Buffer.from(key).toString('base64') },
    });
    const render = async (key: string) => {
      const api = await KubeApiStandIn.start([mine(key)]);
      try {
        return (await helmTemplateAgainst(major, CHART, api, { release: 'tn', set: ['secrets.existingSecret=mine'] })).map((r) => r.object);
      } finally {
        await api.close();
      }
    };
    const [a, b, c] = [await render('k1'), await render('k1'), await render('k2')];
    expect(secretOf(a)).toBeUndefined();
    expect(a).toEqual(b);
    expect(checksum(c)).not.toBe(checksum(a));
  });

  it('the upgrade check catches a chart that redraws the key at each render', async () => {
    expect(await upgradeDifferences(major, CHART, { release: 'tn' })).toEqual([]);
    const redraws = path.join(tmp, `redraws-${major}`);
    fs.cpSync(CHART, redraws, { recursive: true });
    const helpers = path.join(redraws, 'templates/_helpers.tpl');
    const text = fs.readFileSync(helpers, 'utf8');
    const noLookup = text.replace(/\{\{- \$existing := lookup [^\n]*\n/, '{{- $existing := dict }}\n');
    expect(noLookup).not.toBe(text);
    fs.writeFileSync(helpers, noLookup);
    const diff = await upgradeDifferences(major, redraws, { release: 'tn' });
    expect(diff.join('\n')).toMatch(/engine-admin-key|checksum\/secrets/);
  });
});
