// The chart checks `npm run deploy:check` runs, with Helm 3 and with Helm 4:
// `helm lint --strict` and `helm template` for each case (default values, the
// production values file, every `helm install` the docs show, any extra -f
// files), every rendered object validated offline (kubernetes-models plus
// the unknown-field probe), and the two Helms' renders compared: they must
// produce the same objects (Helm 4 printing 3.3554432e+07 where Helm 3 prints
// 33554432 is how such a difference shows).
import { isDeepStrictEqual } from 'node:util';
import path from 'node:path';
import { documentedInstalls, docFiles } from './documented-installs.ts';
import { helmLint, helmTemplate, type HelmOptions, type RenderedObject } from './helm-render.ts';
import type { HelmMajor } from './helm-tools.ts';
import { checkSchema, validateK8sObject } from './k8s-validate.ts';
import { KSERVE_SCHEMAS } from './kserve-schema.ts';
import { podSecurityViolations } from './pod-security.ts';
import { PROMETHEUS_OPERATOR_SCHEMAS } from './prometheus-operator-schema.ts';

/** The custom resources a rendered chart may hold, by `apiVersion kind`, with their structural schemas. */
export const CUSTOM_RESOURCE_SCHEMAS = { ...KSERVE_SCHEMAS, ...PROMETHEUS_OPERATOR_SCHEMAS };

/** A rendered object's problems: a custom resource against its CRD's schema, any other against Kubernetes' own. */
export function validateObject(obj: Record<string, any>): string[] {
  const crd = CUSTOM_RESOURCE_SCHEMAS[`${obj?.apiVersion} ${obj?.kind}`];
  if (!crd) return validateK8sObject(obj);
  return checkSchema(obj, crd).map((e) => `${obj.kind}/${obj.metadata?.name}: ${e}`);
}

export interface ChartCase {
  label: string;
  options: HelmOptions;
}

export const HELM_MAJORS: HelmMajor[] = [3, 4];

/** Values that turn on every object the defaults leave out, so each is rendered and validated too. */
export const EVERY_OPTIONAL_OBJECT = [
  'serviceMonitor.enabled=true',
  'serviceMonitor.labels.release=kube-prometheus-stack',
  'autoscaling.enabled=true',
  'networkPolicy.engine.allowedNamespaces={ml-batch,ml-online}',
  'networkPolicy.engine.from[0].podSelector.matchLabels.role=triton-client',
  'networkPolicy.gateway.from[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=ingress-nginx',
  'networkPolicy.metrics.allowedNamespaces={monitoring}',
];
/** The same, as JSON values (a function file's text has commas and braces `--set` would split). */
export const EVERY_OPTIONAL_OBJECT_JSON = [
  `functions.files=${JSON.stringify({ 'echo.json': JSON.stringify({ name: 'echo', target: { model: 'product_recommender_model' } }) })}`,
];

/** The cases every run checks, for the repository at `root`. */
export function chartCases(root: string, extraValues: string[] = []): ChartCase[] {
  const prod = path.join(root, 'deploy/helm/values-production.yaml');
  return [
    { label: 'default values', options: {} },
    { label: 'values-production.yaml', options: { values: [prod] } },
    { label: 'values-production.yaml + values-gpu.yaml', options: { values: [prod, path.join(root, 'deploy/helm/values-gpu.yaml')] } },
    {
      label: 'every optional object on',
      options: { set: EVERY_OPTIONAL_OBJECT, extra: EVERY_OPTIONAL_OBJECT_JSON.flatMap((j) => ['--set-json', j]) },
    },
    ...documentedInstalls(root, docFiles(root)).map((d) => ({
      label: `${d.where} (helm install ${d.release} ...)`,
      options: { release: d.release, extra: d.args },
    })),
    ...extraValues.map((f) => ({ label: path.relative(process.cwd(), f), options: { values: [f] } })),
  ];
}

export interface CaseResult {
  label: string;
  objects: number;
  problems: string[];
}

/** Lint, render and validate one case with both Helms. */
export function checkChartCase(chartDir: string, c: ChartCase): CaseResult {
  const problems: string[] = [];
  const renders = new Map<HelmMajor, RenderedObject[]>();
  for (const major of HELM_MAJORS) {
    for (const p of helmLint(major, chartDir, c.options)) problems.push(`helm ${major} lint: ${p}`);
    try {
      renders.set(major, helmTemplate(major, chartDir, c.options));
    } catch (e) {
      problems.push((e as Error).message);
    }
  }
  const [h3, h4] = [renders.get(3), renders.get(4)].map((r) => r && sameGeneratedKey(r));
  if (h3 && h4 && !isDeepStrictEqual(h3, h4)) problems.push(`Helm 3 and Helm 4 render different objects:\n${firstDifference(h3, h4)}`);
  const objects = h3 ?? h4 ?? [];
  for (const o of objects) for (const e of validateObject(o.object)) problems.push(`${o.source}: ${e}`);
  // Every pod the chart makes meets Pod Security "restricted" (a namespace enforcing it admits them).
  for (const o of objects) {
    const pod = o.object.spec?.template?.spec;
    if (pod)
      for (const v of podSecurityViolations(pod, 'restricted'))
        problems.push(`${o.source} ${o.object.kind}/${o.object.metadata.name}: Pod Security restricted, ${v}`);
  }
  return { label: c.label, objects: objects.length, problems };
}

/**
 * The Secret's engine-admin-key, when the chart generated it (48 random
 * characters: `helm template` has no cluster to look the kept one up in), and
 * the pods' checksum of it, replaced by markers so two renders compare equal.
 */
export function sameGeneratedKey(objects: RenderedObject[]): RenderedObject[] {
  const generated = (o: RenderedObject) =>
    o.object.kind === 'Secret' && /^[A-Za-z0-9]{48}$/.test(o.object.stringData?.['engine-admin-key'] ?? '');
  if (!objects.some(generated)) return objects;
  return objects.map((o) => {
    if (generated(o)) return { ...o, object: { ...o.object, stringData: { ...o.object.stringData, 'engine-admin-key': '<generated>' } } };
    const annotations = o.object.spec?.template?.metadata?.annotations;
    if (!annotations?.['checksum/secrets']) return o;
    const copy = structuredClone(o.object);
    copy.spec.template.metadata.annotations['checksum/secrets'] = '<checksum of a generated key>';
    return { ...o, object: copy };
  });
}

/** The first field where two renders differ, as "path: helm3 value | helm4 value". */
export function firstDifference(a: unknown, b: unknown, at = ''): string {
  if (isDeepStrictEqual(a, b)) return '';
  if (a && b && typeof a === 'object' && typeof b === 'object') {
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
      const d = firstDifference((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], at ? `${at}.${k}` : k);
      if (d) return d;
    }
  }
  return `${at || '(root)'}: ${JSON.stringify(a)} | ${JSON.stringify(b)}`;
}
