// `npm run deploy:check`: render the chart with its default values and with
// deploy/helm/values-production.yaml (plus any -f files given), validate
// every object offline (Kubernetes schemas + unknown fields), and check the
// KServe manifests and the Prometheus Adapter values against their schemas.
// Exits 1 listing every problem. No cluster and no helm binary needed.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, parseAllDocuments } from 'yaml';
import { renderChart } from './render-chart.ts';
import { checkSchema, validateK8sObject } from './k8s-validate.ts';
import { KSERVE_SCHEMAS, PROMETHEUS_ADAPTER_VALUES } from './kserve-schema.ts';

const DEPLOY = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const extra: string[] = [];
for (let i = 2; i < process.argv.length; i++) if (process.argv[i] === '-f') extra.push(process.argv[++i]!);

const problems: string[] = [];
let checked = 0;
for (const files of [[], [path.join(DEPLOY, 'helm/values-production.yaml')], ...extra.map((f) => [f])]) {
  const label = files.length ? path.relative(process.cwd(), files[0]!) : 'default values';
  try {
    for (const o of renderChart(path.join(DEPLOY, 'helm/tritonish'), { valuesFiles: files })) {
      checked++;
      for (const e of validateK8sObject(o.object)) problems.push(`chart (${label}) ${o.source}: ${e}`);
    }
  } catch (e) {
    problems.push(`chart (${label}): ${(e as Error).message}`);
  }
}
for (const f of fs.readdirSync(path.join(DEPLOY, 'kserve')).filter((n) => n.endsWith('.yaml'))) {
  for (const doc of parseAllDocuments(fs.readFileSync(path.join(DEPLOY, 'kserve', f), 'utf8'))) {
    const o = doc.toJS() as Record<string, any> | null;
    if (!o) continue;
    checked++;
    const schema = KSERVE_SCHEMAS[`${o.apiVersion} ${o.kind}`];
    if (!schema) problems.push(`kserve/${f}: no schema for ${o.apiVersion} ${o.kind}`);
    else for (const e of checkSchema(o, schema)) problems.push(`kserve/${f} ${o.kind}/${o.metadata?.name}: ${e}`);
  }
}
checked++;
for (const e of checkSchema(parse(fs.readFileSync(path.join(DEPLOY, 'prometheus-adapter/rules.yaml'), 'utf8')), PROMETHEUS_ADAPTER_VALUES)) {
  problems.push(`prometheus-adapter/rules.yaml: ${e}`);
}
if (problems.length) {
  process.stderr.write(`${problems.join('\n')}\n${problems.length} problem(s) in ${checked} objects\n`);
  process.exit(1);
}
process.stdout.write(`deploy: ${checked} objects valid (Kubernetes schemas, no unknown fields)\n`);
