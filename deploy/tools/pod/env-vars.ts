// A container's environment as the kubelet builds it, and Kubernetes'
// `$(VAR)` expansion (the rules of the API reference for `env[].value`,
// `command` and `args`): `$(NAME)` becomes NAME's value when NAME is defined
// (for env, earlier in the same list), and stays as written when it is not;
// `$$` is an escaped `$` (so `$$(NAME)` gives `$(NAME)` unexpanded); a `$`
// before anything else, or a `$(` never closed, is kept as it is.
//
// valueFrom: secretKeyRef and configMapKeyRef read the objects the caller
// holds (the rendered manifest, plus objects already in the cluster); a
// missing object or key fails the container, as the kubelet's
// CreateContainerConfigError does, unless the reference is `optional`, which
// leaves the variable out. fieldRef answers the pod fields listed below.

export type Obj = Record<string, any>;

/** Expands `$(NAME)` references in `input` with `lookup` (undefined: left as written). */
export function expandReferences(input: string, lookup: (name: string) => string | undefined): string {
  let out = '';
  let i = 0;
  while (i < input.length) {
    const c = input[i]!;
    if (c !== '$' || i + 1 >= input.length) {
      out += c;
      i++;
      continue;
    }
    const next = input[i + 1]!;
    if (next === '$') {
      out += '$';
      i += 2;
    } else if (next === '(') {
      const close = input.indexOf(')', i + 2);
      if (close < 0) {
        out += '$(';
        i += 2;
      } else {
        const name = input.slice(i + 2, close);
        out += lookup(name) ?? `$(${name})`;
        i = close + 1;
      }
    } else {
      out += `$${next}`;
      i += 2;
    }
  }
  return out;
}

/** What valueFrom and fieldRef read. */
export interface EnvSources {
  /** Secrets and ConfigMaps by `Kind/name`. */
  objects: Map<string, Obj>;
  /** Pod fields for fieldRef (metadata.name, metadata.namespace, status.podIP, spec.nodeName, spec.serviceAccountName, ...). */
  fields: Record<string, string>;
}

/** The string values of a Secret (stringData over base64 data, as the API server merges them) or ConfigMap. */
function objectValues(o: Obj): Record<string, string> {
  if (o.kind === 'Secret') {
    const data = Object.fromEntries(
      Object.entries((o.data ?? {}) as Record<string, string>).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
    );
    return { ...data, ...(o.stringData ?? {}) };
  }
  return { ...(o.data ?? {}) };
}

function fromRef(kind: 'Secret' | 'ConfigMap', ref: Obj, sources: EnvSources, what: string): string | undefined {
  const o = sources.objects.get(`${kind}/${ref.name}`);
  if (!o) {
    if (ref.optional) return undefined;
    throw new Error(`${what}: ${kind} '${ref.name}' not found`);
  }
  const value = objectValues(o)[ref.key];
  if (value === undefined && !ref.optional) throw new Error(`${what}: ${kind} '${ref.name}' has no key '${ref.key}'`);
  return value;
}

/**
 * The environment of `container` in order: the image's (`NAME=value` strings),
 * then envFrom, then env, each later entry replacing an earlier one of the
 * same name. Throws naming the variable when a required reference cannot be met.
 */
export function containerEnv(container: Obj, imageEnv: string[], sources: EnvSources): Map<string, string> {
  const env = new Map<string, string>();
  for (const e of imageEnv) {
    const eq = e.indexOf('=');
    env.set(eq < 0 ? e : e.slice(0, eq), eq < 0 ? '' : e.slice(eq + 1));
  }
  const where = `container ${container.name}`;
  // What $(VAR) in an env value may name: variables of envFrom and of this list so far, not the image's.
  const defined = new Map<string, string>();
  for (const from of (container.envFrom ?? []) as Obj[]) {
    const [kind, ref] = from.secretRef ? (['Secret', from.secretRef] as const) : (['ConfigMap', from.configMapRef] as const);
    const o = sources.objects.get(`${kind}/${ref.name}`);
    if (!o) {
      if (ref.optional) continue;
      throw new Error(`${where}: envFrom ${kind} '${ref.name}' not found`);
    }
    for (const [k, v] of Object.entries(objectValues(o))) {
      env.set(`${from.prefix ?? ''}${k}`, v);
      defined.set(`${from.prefix ?? ''}${k}`, v);
    }
  }
  for (const e of (container.env ?? []) as Obj[]) {
    const what = `${where}: env ${e.name}`;
    let value: string | undefined;
    if (e.valueFrom?.secretKeyRef) value = fromRef('Secret', e.valueFrom.secretKeyRef, sources, what);
    else if (e.valueFrom?.configMapKeyRef) value = fromRef('ConfigMap', e.valueFrom.configMapKeyRef, sources, what);
    else if (e.valueFrom?.fieldRef) {
      value = sources.fields[e.valueFrom.fieldRef.fieldPath];
      if (value === undefined) throw new Error(`${what}: fieldRef '${e.valueFrom.fieldRef.fieldPath}' is not simulated`);
    } else if (e.valueFrom) throw new Error(`${what}: valueFrom ${Object.keys(e.valueFrom).join(', ')} is not simulated`);
    else value = expandReferences(String(e.value ?? ''), (n) => defined.get(n));
    if (value === undefined) continue; // an optional reference that is not there: the variable is not set
    env.set(e.name, value);
    defined.set(e.name, value);
  }
  return env;
}
