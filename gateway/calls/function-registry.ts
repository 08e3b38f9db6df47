// The set of callable functions: the definitions from functions/ (or a
// deployed bundle) plus every ensemble the engine serves, resolved against the
// engine's model metadata into concrete input/output tensor specs.
//
// Ownership: the registry owns the active definition snapshot. replace()
// swaps it atomically; a call holds the ResolvedFunction it started with, so
// a swap never changes a call in flight. Single-threaded (event loop).
import fs from 'node:fs';
import path from 'node:path';
import type { ModelIndex, ModelMetadataResponse } from '../../client/grpc-client.ts';
import { gatewayError } from '../core/errors.ts';
import { FunctionDefinitionSchema, describeIssues, type FunctionDefinition } from './function-schema.ts';
import { gatewayLog as log } from '../../common/logger.ts';

/** What the registry needs from the engine (EngineClient implements it). */
export interface MetadataSource {
  modelMetadata(name: string, version?: string): Promise<ModelMetadataResponse>;
  listModels(): Promise<ModelIndex[]>;
}

/** One input or output of a function: public name, engine tensor, type, shape (-1 = any). */
export interface TensorSpec {
  name: string;
  tensor: string;
  datatype: string;
  shape: number[];
}

export interface ResolvedFunction {
  name: string;
  model: string;
  version: string;
  platform: string;
  /** True for an engine ensemble served without a functions/ file. */
  implicit: boolean;
  definition: FunctionDefinition;
  inputs: TensorSpec[];
  outputs: TensorSpec[];
}

/** Read and validate every *.json in dir; throws one Error listing all problems. */
export function loadFunctionDirectory(dir: string): FunctionDefinition[] {
  if (!fs.existsSync(dir)) return [];
  const errors: string[] = [];
  const defs: FunctionDefinition[] = [];
  const seen = new Map<string, string>();
  for (const file of fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()) {
    const full = path.join(dir, file);
    let raw: unknown;
    try {
      raw = JSON.parse(fs.readFileSync(full, 'utf8'));
    } catch (e) {
      errors.push(`${full}: not valid JSON: ${(e as Error).message}`);
      continue;
    }
    const parsed = FunctionDefinitionSchema.safeParse(raw);
    if (!parsed.success) {
      errors.push(...describeIssues(parsed.error, `${full}: `));
      continue;
    }
    const prev = seen.get(parsed.data.name);
    if (prev) errors.push(`${full}: function '${parsed.data.name}' is already defined in ${prev}`);
    seen.set(parsed.data.name, full);
    defs.push(parsed.data);
  }
  if (errors.length) throw new Error(`invalid function definitions:\n  ${errors.join('\n  ')}`);
  return defs;
}

/** Check a definition against its target's metadata; returns problems (empty = fits). */
export function checkDefinition(def: FunctionDefinition, md: ModelMetadataResponse): string[] {
  const problems: string[] = [];
  const ins = new Set(md.inputs.map((t) => t.name));
  const outs = new Set(md.outputs.map((t) => t.name));
  const mappedIns = Object.values(def.inputs ?? {});
  for (const [pub, t] of Object.entries(def.inputs ?? {})) {
    if (!ins.has(t)) problems.push(`input '${pub}' maps to '${t}', which model '${md.name}' does not have`);
  }
  if (def.inputs) {
    for (const t of ins) if (!mappedIns.includes(t)) problems.push(`model input '${t}' of '${md.name}' is not mapped`);
  }
  for (const [pub, t] of Object.entries(def.outputs ?? {})) {
    if (!outs.has(t)) problems.push(`output '${pub}' maps to '${t}', which model '${md.name}' does not have`);
  }
  const fnOutputs = new Set(def.outputs ? Object.keys(def.outputs) : outs);
  for (const [field, out] of Object.entries(def.rows?.fields ?? {})) {
    if (!fnOutputs.has(out)) problems.push(`rows field '${field}' names output '${out}', which the function does not have`);
  }
  return problems;
}

/** The resolved shape of a function: pure, from a definition and metadata. */
export function resolveFunction(def: FunctionDefinition, md: ModelMetadataResponse, implicit: boolean): ResolvedFunction {
  const byIn = new Map(md.inputs.map((t) => [t.name, t]));
  const byOut = new Map(md.outputs.map((t) => [t.name, t]));
  const inMap = def.inputs ?? Object.fromEntries(md.inputs.map((t) => [t.name, t.name]));
  const outMap = def.outputs ?? Object.fromEntries(md.outputs.map((t) => [t.name, t.name]));
  const spec = (pub: string, t: { name: string; datatype: string; shape?: number[] }): TensorSpec => ({
    name: pub,
    tensor: t.name,
    datatype: t.datatype,
    shape: [...(t.shape ?? [])],
  });
  return {
    name: def.name,
    model: def.target.model,
    version: def.target.version,
    platform: md.platform,
    implicit,
    definition: def,
    inputs: Object.entries(inMap).map(([pub, t]) => spec(pub, byIn.get(t)!)),
    outputs: Object.entries(outMap).map(([pub, t]) => spec(pub, byOut.get(t)!)),
  };
}

/** The definition an ensemble gets when no functions/ file names it. */
export function implicitDefinition(model: string): FunctionDefinition {
  return FunctionDefinitionSchema.parse({ name: model, target: { model } });
}

/** True for the engine client's errors that mean the engine itself could not answer. */
function engineDown(e: unknown): boolean {
  const code = (e as { code?: string }).code;
  return code === 'ENGINE_UNAVAILABLE' || code === 'ENGINE_TIMEOUT';
}

export class FunctionRegistry {
  private defs = new Map<string, FunctionDefinition>();
  private bundleVersion = '0';
  private ensembles = new Set<string>();
  private lastRefresh = 0;
  /** Why the last refresh failed (undefined: it succeeded). */
  private refreshFailure: unknown;
  private readonly cache = new Map<string, { md: ModelMetadataResponse; fn: ResolvedFunction }>();

  constructor(
    private readonly engine: MetadataSource,
    definitions: FunctionDefinition[] = [],
    version = '1',
    private readonly refreshIntervalMs = 2000,
  ) {
    this.replace(definitions, version);
  }

  /** Swap the whole set of definitions at once (deploys). */
  replace(definitions: FunctionDefinition[], version: string): void {
    this.defs = new Map(definitions.map((d) => [d.name, d]));
    this.bundleVersion = version;
    this.cache.clear();
  }

  get version(): string {
    return this.bundleVersion;
  }

  /** The explicit definitions, in name order. */
  definitions(): FunctionDefinition[] {
    return [...this.defs.values()].sort((a, b) => a.name.localeCompare(b.name));
  }

  /**
   * Re-read which ensembles the engine serves (rate-limited unless forced).
   * Throws the engine client's catalog error (ENGINE_UNAVAILABLE, _TIMEOUT,
   * _ERROR) when the engine cannot be asked; within the rate limit a failed
   * refresh throws again, so an outage never reads as "no such ensemble".
   */
  async refreshEnsembles(force = false): Promise<void> {
    const now = Date.now();
    if (!force && now - this.lastRefresh < this.refreshIntervalMs) {
      if (this.refreshFailure !== undefined) throw this.refreshFailure;
      return;
    }
    this.lastRefresh = now;
    try {
      const found = new Set<string>();
      const models = await this.engine.listModels();
      for (const m of models) {
        if (m.state && m.state !== 'READY') continue;
        try {
          const md = await this.engine.modelMetadata(m.name);
          if (md.platform === 'ensemble') found.add(m.name);
        } catch (e) {
          if (engineDown(e)) throw e;
          // Unloaded between the index and this question: not an ensemble we serve now.
        }
      }
      this.ensembles = found;
      this.refreshFailure = undefined;
    } catch (e) {
      this.refreshFailure = e;
      throw e;
    }
  }

  /** Names of every callable function (explicit + implicit ensembles). */
  names(): string[] {
    const all = new Set([...this.defs.keys(), ...this.ensembles]);
    return [...all].sort();
  }

  /** Resolve a function for a call; throws FUNCTION_NOT_FOUND / _UNAVAILABLE / _MISCONFIGURED. */
  async resolve(name: string): Promise<ResolvedFunction> {
    let def = this.defs.get(name);
    let implicit = false;
    if (!def) {
      // An engine that cannot be asked answers with its own error (503/504/502), never FUNCTION_NOT_FOUND.
      if (!this.ensembles.has(name)) await this.refreshEnsembles();
      if (!this.ensembles.has(name)) throw gatewayError('FUNCTION_NOT_FOUND', { name });
      def = implicitDefinition(name);
      implicit = true;
    }
    let md: ModelMetadataResponse;
    try {
      md = await this.engine.modelMetadata(def.target.model, def.target.version);
    } catch (e) {
      if ((e as { code?: string }).code === 'ENGINE_UNAVAILABLE') throw e;
      throw gatewayError('FUNCTION_UNAVAILABLE', { name, model: def.target.model }, e);
    }
    const hit = this.cache.get(name);
    if (hit && hit.md === md && hit.fn.definition === def) return hit.fn;
    const problems = checkDefinition(def, md);
    if (problems.length) {
      log.error(`function '${name}' does not fit model '${md.name}': ${problems.join('; ')}`);
      throw gatewayError('FUNCTION_MISCONFIGURED', { name, model: def.target.model, reason: problems[0]! });
    }
    const fn = resolveFunction(def, md, implicit);
    this.cache.set(name, { md, fn });
    return fn;
  }

  /** Every function that resolves now, plus the names that do not and why. */
  async list(): Promise<{ functions: ResolvedFunction[]; unavailable: Array<{ name: string; reason: string }> }> {
    try {
      await this.refreshEnsembles();
    } catch {
      // Dropped on purpose: the listing still answers, each explicit function below says in `unavailable` that the
      // engine is not reachable, and the engine client logged the outage once when it saw it.
    }
    const functions: ResolvedFunction[] = [];
    const unavailable: Array<{ name: string; reason: string }> = [];
    for (const n of this.names()) {
      try {
        functions.push(await this.resolve(n));
      } catch (e) {
        unavailable.push({ name: n, reason: (e as Error).message });
      }
    }
    return { functions, unavailable };
  }
}

/** A function as GET /fn and the console describe it. */
export function describeFunction(fn: ResolvedFunction) {
  const t = (s: ResolvedFunction['inputs'][number]) => ({ name: s.name, tensor: s.tensor, datatype: s.datatype, shape: s.shape });
  return {
    name: fn.name,
    description: fn.definition.description,
    target: { model: fn.model, version: fn.version, platform: fn.platform },
    implicit: fn.implicit,
    auth: !!fn.definition.auth,
    limits: fn.definition.limits,
    inputs: fn.inputs.map(t),
    outputs: fn.outputs.map(t),
  };
}
