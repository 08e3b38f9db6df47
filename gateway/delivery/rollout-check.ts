// The checks a rollout passes before anything is stored: the request parses
// (shares 0-100, steps, gates with a minimum call count), the function
// exists, and each new target (canary, shadow) is served by the engine and
// has the function's inputs and outputs: same tensors, datatypes and shapes.
import {
  checkDefinition,
  resolveFunction,
  type MetadataSource,
  type ResolvedFunction,
  type TensorSpec,
} from '../calls/function-registry.ts';
import { describeIssues, type FunctionDefinition } from '../calls/function-schema.ts';
import { RolloutRequestSchema, type RolloutRequest } from './rollout-spec.ts';

/** The function's definition with another target: the canary's or the shadow's. */
export function retarget(def: FunctionDefinition, target: FunctionDefinition['target']): FunctionDefinition {
  return { ...def, target: { ...target } };
}

const sig = (s: TensorSpec) => `${s.name}:${s.tensor}:${s.datatype}[${s.shape.join(',')}]`;

/** Differences between two resolved functions' inputs and outputs (empty = they match). */
export function ioMismatch(stable: ResolvedFunction, next: ResolvedFunction): string[] {
  const out: string[] = [];
  for (const [kind, a, b] of [
    ['input', stable.inputs, next.inputs],
    ['output', stable.outputs, next.outputs],
  ] as const) {
    const want = new Map(a.map((s) => [s.name, sig(s)]));
    const got = new Map(b.map((s) => [s.name, sig(s)]));
    for (const [n, s] of want) {
      const g = got.get(n);
      if (!g) out.push(`${kind} '${n}' is missing on '${next.model}'`);
      else if (g !== s)
        out.push(`${kind} '${n}' is ${g.slice(n.length + 1)} on '${next.model}' but ${s.slice(n.length + 1)} on '${stable.model}'`);
    }
    for (const n of got.keys()) if (!want.has(n)) out.push(`${kind} '${n}' of '${next.model}' is not one of the function's`);
  }
  return out;
}

/** Resolve the function under a new target and check it fits; returns it or the problems. */
export async function resolveTarget(
  engine: Pick<MetadataSource, 'modelMetadata'>,
  stable: ResolvedFunction,
  target: FunctionDefinition['target'],
  what: string,
): Promise<{ fn?: ResolvedFunction; problems: string[] }> {
  const def = retarget(stable.definition, target);
  let md;
  try {
    md = await engine.modelMetadata(target.model, target.version);
  } catch (e) {
    return {
      problems: [
        `${what}: target model '${target.model}'${target.version ? ` version ${target.version}` : ''} is not served by the engine (${(e as Error).message})`,
      ],
    };
  }
  const problems = checkDefinition(def, md).map((p) => `${what}: ${p}`);
  if (problems.length) return { problems };
  const fn = resolveFunction(def, md, stable.implicit);
  const io = ioMismatch(stable, fn).map((p) => `${what}: ${p}`);
  return io.length ? { problems: io } : { fn, problems: [] };
}

/** Parse and check a rollout request against the stable function; every problem found, or the parsed request. */
export async function checkRollout(
  raw: unknown,
  resolveStable: (name: string) => Promise<ResolvedFunction>,
  engine: Pick<MetadataSource, 'modelMetadata'>,
): Promise<{ request?: RolloutRequest; stable?: ResolvedFunction; errors: string[] }> {
  const p = RolloutRequestSchema.safeParse(raw);
  if (!p.success) return { errors: describeIssues(p.error) };
  const req = p.data;
  let stable: ResolvedFunction;
  try {
    stable = await resolveStable(req.function);
  } catch (e) {
    return { errors: [`function: ${(e as Error).message}`] };
  }
  const errors: string[] = [];
  if (req.next) errors.push(...(await resolveTarget(engine, stable, req.next.target, 'next')).problems);
  if (req.shadow) errors.push(...(await resolveTarget(engine, stable, req.shadow.target, 'shadow')).problems);
  return errors.length ? { errors } : { request: req, stable, errors };
}
