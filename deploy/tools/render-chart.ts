// Renders a Helm chart with helm-template.ts, as `helm template` would for our
// subset: Chart.yaml + values.yaml, deep-merged with `-f` values files in
// order (maps merge, lists and scalars replace), every templates/*.yaml
// rendered, split into documents and parsed. Why not helm: see helm-template.ts.
//
//   node --import tsx deploy/tools/render-chart.ts deploy/helm/tritonish [-f values.yaml ...] [--name=R] [--namespace=N]
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { renderTemplate, type RenderContext } from './helm-template.ts';

export interface RenderedObject {
  /** The template file it came from. */
  source: string;
  object: Record<string, any>;
}

export interface RenderOptions {
  valuesFiles?: string[];
  releaseName?: string;
  namespace?: string;
  /** Values set last, as `--set` would (already structured). */
  set?: Record<string, unknown>;
}

const isMap = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Helm's values merge: maps merge key by key, anything else replaces; null deletes a key. */
export function mergeValues(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    if (v === null) delete out[k];
    else out[k] = isMap(v) && isMap(out[k]) ? mergeValues(out[k] as Record<string, unknown>, v) : v;
  }
  return out;
}

const readYaml = (file: string): Record<string, unknown> => (parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>) ?? {};

/** Render every template of the chart into parsed objects (empty documents dropped). */
export function renderChart(chartDir: string, o: RenderOptions = {}): RenderedObject[] {
  const chart = readYaml(path.join(chartDir, 'Chart.yaml'));
  let values = readYaml(path.join(chartDir, 'values.yaml'));
  for (const f of o.valuesFiles ?? []) values = mergeValues(values, readYaml(f));
  if (o.set) values = mergeValues(values, o.set);
  const ctx: RenderContext = {
    Values: values,
    Release: { Name: o.releaseName ?? 'tritonish', Namespace: o.namespace ?? 'default', Service: 'Helm' },
    Chart: { Name: String(chart.name), Version: String(chart.version), AppVersion: chart.appVersion === undefined ? undefined : String(chart.appVersion) },
  };
  const dir = path.join(chartDir, 'templates');
  const out: RenderedObject[] = [];
  for (const f of fs.readdirSync(dir).filter((n) => /\.ya?ml$/.test(n) && !n.startsWith('_')).sort()) {
    const source = `templates/${f}`;
    const text = renderTemplate(fs.readFileSync(path.join(dir, f), 'utf8'), ctx, source);
    for (const doc of parseAllDocuments(text)) {
      if (doc.errors.length) throw new Error(`${source}: rendered YAML is invalid: ${doc.errors[0]!.message}\n${text}`);
      const obj = doc.toJS();
      if (obj !== null && obj !== undefined) out.push({ source, object: obj });
    }
  }
  return out;
}

/** Print rendered objects as one multi-document YAML stream (what `kubectl apply -f -` takes). */
export function toManifest(objects: RenderedObject[]): string {
  return objects.map((o) => `# Source: ${o.source}\n${stringify(o.object, { lineWidth: 0 })}`).join('---\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const args = process.argv.slice(2);
  const valuesFiles: string[] = [];
  let chartDir: string | undefined;
  let releaseName: string | undefined;
  let namespace: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '-f' || a === '--values') valuesFiles.push(args[++i]!);
    else if (a.startsWith('--name=')) releaseName = a.slice(7);
    else if (a.startsWith('--namespace=')) namespace = a.slice(12);
    else chartDir = a;
  }
  if (!chartDir) {
    process.stderr.write('usage: render-chart.ts CHART_DIR [-f values.yaml ...] [--name=RELEASE] [--namespace=NS]\n');
    process.exit(2);
  }
  process.stdout.write(toManifest(renderChart(chartDir, { valuesFiles, releaseName, namespace })));
}
