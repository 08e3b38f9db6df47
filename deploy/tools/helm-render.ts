// Runs the real Helm (helm-tools.ts) on a chart: `helm template` into parsed
// objects, `helm lint --strict` into a list of problems. Rendered manifests
// are read with YAML 1.1 rules, as the Kubernetes API machinery reads them
// (go-yaml v2): an unquoted `yes`, `on`, `off` or `y` is a boolean there, so
// it is one here too and fails the schema of a string field.
import { execFileSync } from 'node:child_process';
import { parseAllDocuments } from 'yaml';
import { ensureHelm, type HelmMajor } from './helm-tools.ts';

export interface RenderedObject {
  /** The template it came from, e.g. templates/deployment.yaml. */
  source: string;
  object: Record<string, any>;
}

export interface HelmOptions {
  release?: string;
  namespace?: string;
  /** `-f` files, in order. */
  values?: string[];
  /** `--set` arguments (`a.b=c`), in order. */
  set?: string[];
  /** `--set-string` arguments, in order. */
  setString?: string[];
  /** Arguments passed as they are (e.g. taken from a documented `helm install` line). */
  extra?: string[];
}

/** The values and release arguments of `o`, as Helm takes them. */
export function helmArgs(o: HelmOptions): string[] {
  return [
    ...(o.namespace ? ['--namespace', o.namespace] : []),
    ...(o.values ?? []).flatMap((f) => ['-f', f]),
    ...(o.set ?? []).flatMap((s) => ['--set', s]),
    ...(o.setString ?? []).flatMap((s) => ['--set-string', s]),
    ...(o.extra ?? []),
  ];
}

function run(major: HelmMajor, args: string[]): { ok: boolean; out: string } {
  try {
    return {
      ok: true,
      out: execFileSync(ensureHelm(major), args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 }),
    };
  } catch (e) {
    const err = e as { stdout?: string; stderr?: string; message: string };
    return { ok: false, out: `${err.stdout ?? ''}${err.stderr ?? ''}` || err.message };
  }
}

/** Split a `helm template` stream into objects, each with the template named by its `# Source:` line. */
export function parseManifest(text: string): RenderedObject[] {
  const out: RenderedObject[] = [];
  for (const doc of parseAllDocuments(text, { version: '1.1' })) {
    if (doc.errors.length) throw new Error(`rendered YAML is invalid: ${doc.errors[0]!.message}`);
    const source = /# Source: [^/]+\/(\S+)/.exec(doc.commentBefore ?? '')?.[1] ?? '(unknown template)';
    // JSON round trip: what the API server stores (a YAML 1.1 timestamp becomes its string form).
    const object = JSON.parse(JSON.stringify(doc.toJS() ?? null)) as Record<string, any> | null;
    if (object !== null) out.push({ source, object });
  }
  return out;
}

/** `helm template` with Helm `major`; throws with Helm's own message when it fails. */
export function helmTemplate(major: HelmMajor, chartDir: string, o: HelmOptions = {}): RenderedObject[] {
  const r = run(major, ['template', o.release ?? 'tritonish', chartDir, ...helmArgs(o)]);
  if (!r.ok) throw new Error(`helm ${major} template failed: ${r.out.trim()}`);
  return parseManifest(r.out);
}

/** `helm lint --strict` with Helm `major`: [] when clean, else Helm's error and warning lines. */
export function helmLint(major: HelmMajor, chartDir: string, o: HelmOptions = {}): string[] {
  const r = run(major, ['lint', '--strict', chartDir, ...helmArgs(o)]);
  if (r.ok) return [];
  const lines = r.out.split('\n').filter((l) => /\[(ERROR|WARNING)\]|^Error/.test(l));
  return lines.length ? lines : [r.out.trim()];
}
