// Offline validation of rendered Kubernetes objects, no cluster needed:
//
//  1. the object against the Kubernetes OpenAPI schema, through the
//     `kubernetes-models` class of its apiVersion/kind (types, required
//     fields, enums);
//  2. unknown fields, which that package lets through (its schemas allow
//     additional properties, while the API server drops or refuses them):
//     every field of the object is probed by replacing its value with one no
//     schema type accepts (a Symbol); a field the schema knows then fails
//     validation, a field it does not know still passes, and is reported.
//     This reads the known properties out of the same OpenAPI schema rather
//     than keeping a second list that could drift from it.
//
// Custom resources (KServe) are checked by checkSchema() against a schema we
// write from the CRD's documented fields (kserve-schema.ts), with the same
// rule: anything not in the schema is an error. Fields typed as Kubernetes
// core types (a Container) are handed back to the kubernetes-models checks.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

interface ModelClass {
  new (data: unknown): { validate(): void };
}

/**
 * The kubernetes-models class for `kind` in `apiVersion`, e.g. apps/v1 Deployment
 * (meta/v1 LabelSelector: apimachinery's types); undefined when the package has none.
 */
export function modelClass(apiVersion: string, kind: string): ModelClass | undefined {
  try {
    if (apiVersion.startsWith('meta/')) return require(`@kubernetes-models/apimachinery/apis/${apiVersion}/${kind}`)[kind] as ModelClass;
    return require(`kubernetes-models/${apiVersion}/${kind}`)[kind] as ModelClass;
  } catch {
    return undefined;
  }
}

/** Schema errors of `data` as a `cls`, or [] when it validates. */
function schemaErrors(cls: ModelClass, data: unknown): string[] {
  try {
    new cls(data).validate();
    return [];
  } catch (e) {
    const errs = (e as { errors?: Array<{ instancePath: string; message: string }> }).errors;
    return errs?.length ? errs.map((x) => `${x.instancePath || '/'} ${x.message}`) : [(e as Error).message];
  }
}

type Path = Array<string | number>;
const fmt = (p: Path) => p.reduce<string>((s, k) => (typeof k === 'number' ? `${s}[${k}]` : s ? `${s}.${k}` : k), '');

/** Every object-key path in a JSON value (array indices walked through, not reported). */
function fieldPaths(v: unknown, at: Path = []): Path[] {
  if (Array.isArray(v)) return v.flatMap((x, i) => fieldPaths(x, [...at, i]));
  if (v === null || typeof v !== 'object') return [];
  return Object.entries(v).flatMap(([k, x]) => [[...at, k], ...fieldPaths(x, [...at, k])]);
}

function withValueAt(obj: unknown, p: Path, value: unknown): unknown {
  const copy = structuredClone(obj) as Record<string | number, unknown>;
  let cur = copy;
  for (const k of p.slice(0, -1)) cur = cur[k] as Record<string | number, unknown>;
  cur[p[p.length - 1]!] = value;
  return copy;
}

/** Fields of `data` its schema does not define (paths like spec.template.spec.containers[0].bogus). */
export function unknownFields(cls: ModelClass, data: unknown, skip: (p: Path) => boolean = () => false): string[] {
  const out: string[] = [];
  for (const p of fieldPaths(data)) {
    if (skip(p) || out.some((u) => fmt(p).startsWith(`${u}.`))) continue;
    if (schemaErrors(cls, withValueAt(data, p, Symbol('probe'))).length === 0) out.push(fmt(p));
  }
  return out;
}

/** Both checks for a built-in object; errors name kind/name and the field. */
export function validateK8sObject(obj: Record<string, any>): string[] {
  const id = `${obj?.kind}/${obj?.metadata?.name}`;
  const cls = typeof obj?.apiVersion === 'string' && typeof obj?.kind === 'string' ? modelClass(obj.apiVersion, obj.kind) : undefined;
  if (!cls) return [`${id}: no Kubernetes schema for apiVersion '${obj?.apiVersion}' kind '${obj?.kind}'`];
  const errs = schemaErrors(cls, obj).map((e) => `${id}: ${e}`);
  if (errs.length) return errs; // probing needs a valid object to start from
  return unknownFields(cls, obj).map((f) => `${id}: unknown field '${f}'`);
}

/** A structural schema for custom resources: closed objects unless `additionalProperties` says otherwise. */
export type Schema =
  | {
      type: 'object';
      properties?: Record<string, Schema>;
      additionalProperties?: Schema | true;
      required?: string[];
      /** Fields not in `properties` are those of this Kubernetes type, inlined (KServe's ModelSpec inlines a Container). */
      inlines?: string;
    }
  | { type: 'array'; items: Schema }
  | { type: 'string'; enum?: string[]; pattern?: string }
  | { type: 'integer' | 'number'; minimum?: number }
  | { type: 'boolean' }
  | { type: 'int-or-string' }
  /** A Kubernetes core type, checked by its kubernetes-models class (e.g. 'v1/Container'). */
  | { k8s: string };

/** Errors of `v` against `s`; unknown fields are errors. */
export function checkSchema(v: unknown, s: Schema, at: Path = []): string[] {
  const here = fmt(at) || '(root)';
  if ('k8s' in s) {
    const [ver, kind] = [s.k8s.slice(0, s.k8s.lastIndexOf('/')), s.k8s.slice(s.k8s.lastIndexOf('/') + 1)];
    const cls = modelClass(ver, kind);
    if (!cls) return [`${here}: no schema for ${s.k8s}`];
    const errs = schemaErrors(cls, v).map((e) => `${here}: ${e}`);
    return errs.length ? errs : unknownFields(cls, v).map((f) => `${here}: unknown field '${f}'`);
  }
  switch (s.type) {
    case 'object': {
      if (v === null || typeof v !== 'object' || Array.isArray(v)) return [`${here}: expected an object`];
      const errs: string[] = [];
      for (const r of s.required ?? []) if (!(r in v)) errs.push(`${here}: missing required field '${r}'`);
      if (s.inlines) {
        const rest = Object.fromEntries(Object.entries(v).filter(([k]) => !s.properties?.[k]));
        // The inlined type may require fields the outer object leaves to its controller (a Container's name).
        const filled = { name: 'inlined', ...rest };
        errs.push(...checkSchema(filled, { k8s: s.inlines }, at));
        for (const [k, x] of Object.entries(v)) if (s.properties?.[k]) errs.push(...checkSchema(x, s.properties[k]!, [...at, k]));
        return errs;
      }
      for (const [k, x] of Object.entries(v)) {
        const sub = s.properties?.[k] ?? (s.additionalProperties === true ? undefined : s.additionalProperties);
        if (sub) errs.push(...checkSchema(x, sub, [...at, k]));
        else if (s.additionalProperties !== true) errs.push(`${here}: unknown field '${k}'`);
      }
      return errs;
    }
    case 'array':
      return Array.isArray(v) ? v.flatMap((x, i) => checkSchema(x, s.items, [...at, i])) : [`${here}: expected an array`];
    case 'string':
      if (typeof v !== 'string') return [`${here}: expected a string`];
      if (s.pattern && !new RegExp(s.pattern).test(v)) return [`${here}: '${v}' does not match ${s.pattern}`];
      return s.enum && !s.enum.includes(v) ? [`${here}: '${v}' is not one of ${s.enum.join(', ')}`] : [];
    case 'integer':
    case 'number':
      if (s.type === 'integer' ? !Number.isInteger(v) : typeof v !== 'number')
        return [`${here}: expected ${s.type === 'integer' ? 'an integer' : 'a number'}`];
      return s.minimum !== undefined && (v as number) < s.minimum ? [`${here}: ${v} is less than the minimum ${s.minimum}`] : [];
    case 'boolean':
      return typeof v === 'boolean' ? [] : [`${here}: expected a boolean`];
    case 'int-or-string':
      return Number.isInteger(v) || typeof v === 'string' ? [] : [`${here}: expected an integer or a string`];
  }
}
