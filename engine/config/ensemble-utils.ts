// over 300 lines: past 300 only since the formatter wrapped its long lines (issue 38); to be split
// Triton's ensemble_utils + GetNextSteps as pure functions: build an
// ensemble's plan once at load (each tensor's producer and consumers, a
// topological order, per-step batch handling) validating the wiring against
// the composing models' configs; then answer "which steps can start now".
import { invalidArg } from '../api/status.ts';
import { dimsCompatible, isEnsemble } from './model-config-utils.ts';
import type { ModelConfig, ModelTensorConfig } from '../api/model-config.ts';
import { innerDims } from './reshape.ts';
import { decoupledFlow } from './ensemble-decoupled.ts';

/** Producer of a tensor: a step index, or ENSEMBLE_INPUT for the ensemble's own inputs. */
export const ENSEMBLE_INPUT = -1;

export interface EnsembleTensorInfo {
  name: string;
  data_type: string; // TYPE_FP32
  /** Shape as seen inside the ensemble, without the ensemble's batch dim; -1 = any. */
  dims: number[];
  producer: number;
  consumers: number[];
  isEnsembleOutput: boolean;
}

export interface EnsemblePlanStep {
  index: number;
  modelName: string;
  modelVersion: number; // -1 = latest
  /** Model input name -> ensemble tensor. */
  inputs: { modelInput: string; tensor: string }[];
  /** Model output name -> ensemble tensor. */
  outputs: { modelOutput: string; tensor: string }[];
  /**
   * Ensemble without batching (max_batch_size 0) over a batching model whose
   * dims match the tensors without a batch dim: the step sends [1, ...shape]
   * and strips the leading 1 from its outputs.
   */
  addBatchDim: boolean;
  /** Model outputs whose tensors the ensemble outputs depend on. */
  neededOutputs: string[];
  /** The model is decoupled: each of its responses runs the steps downstream once (ensemble-decoupled.ts). */
  decoupled: boolean;
}

export interface EnsemblePlan {
  name: string;
  maxBatchSize: number;
  steps: EnsemblePlanStep[];
  tensors: Map<string, EnsembleTensorInfo>;
  /** Steps in a dependency order (every producer before its consumers). */
  order: number[];
  inputs: string[];
  outputs: string[];
  /** Tensors the ensemble outputs depend on (transitively), and the steps producing them. */
  neededTensors: ReadonlySet<string>;
  neededSteps: ReadonlySet<number>;
  /** Some step is decoupled: the ensemble streams its responses (and its config says decoupled). */
  decoupled: boolean;
  /** Decoupled steps between the inputs and the outputs: one response per run at that depth. */
  outputDepth: number;
}

export type ConfigLookup = (modelName: string, version: number) => ModelConfig | undefined;

/** Build and validate the plan of an ensemble; throws INVALID_ARG naming ensemble, step, model and tensor. */
export function buildEnsemblePlan(config: ModelConfig, lookup: ConfigLookup, file: string): EnsemblePlan {
  const ens = config.name;
  const fail = (what: string) => invalidArg(`${file}: ensemble '${ens}': ${what}`);
  const rawSteps = config.ensemble_scheduling?.step ?? [];
  if (rawSteps.length === 0) throw fail('needs at least one step');
  const mbs = config.max_batch_size;
  const tensors = new Map<string, EnsembleTensorInfo>();
  for (const t of config.input) {
    tensors.set(t.name, {
      name: t.name,
      data_type: t.data_type,
      dims: innerDims(t),
      producer: ENSEMBLE_INPUT,
      consumers: [],
      isEnsembleOutput: false,
    });
  }

  const { steps, models } = wireSteps(config, lookup, tensors, fail);
  for (const o of config.output) {
    const t = tensors.get(o.name);
    if (!t || t.producer === ENSEMBLE_INPUT) throw fail(`output '${o.name}' is not written by any step`);
    t.isEnsembleOutput = true;
  }
  for (const i of config.input) {
    if (tensors.get(i.name)!.consumers.length === 0) throw fail(`input '${i.name}' is not used by any step`);
  }

  const order = topoOrder(steps, tensors, fail);
  const flow = decoupledFlow(
    steps,
    models,
    order,
    config.input.map((t) => t.name),
    config.output.map((t) => t.name),
    fail,
  );
  for (const s of steps) s.decoupled = flow.stepDecoupled[s.index]!;

  typeSteps(steps, models, order, tensors, mbs, fail);
  for (const o of config.output) {
    const t = tensors.get(o.name)!;
    const where = `output '${o.name}' (written by step[${t.producer}], model '${steps[t.producer]!.modelName}')`;
    if (t.data_type !== o.data_type) throw fail(`${where}: the step produces ${t.data_type}, the ensemble declares ${o.data_type}`);
    const dims = innerDims(o);
    if (!dimsCompatible(dims, t.dims)) throw fail(`${where}: the step produces shape [${t.dims}], the ensemble declares [${dims}]`);
  }

  const { neededTensors, neededSteps } = neededBy(
    config.output.map((o) => o.name),
    steps,
    tensors,
  );
  for (const s of steps) s.neededOutputs = s.outputs.filter((o) => neededTensors.has(o.tensor)).map((o) => o.modelOutput);
  return {
    name: ens,
    maxBatchSize: mbs,
    steps,
    tensors,
    order,
    inputs: config.input.map((t) => t.name),
    outputs: config.output.map((t) => t.name),
    neededTensors,
    neededSteps,
    decoupled: flow.decoupled,
    outputDepth: flow.outputDepth,
  };
}

/** Steps not yet started whose every input tensor is available (Triton's GetNextSteps), in step order. */
export function nextReadySteps(plan: EnsemblePlan, available: { has(tensor: string): boolean }, started: ReadonlySet<number>): number[] {
  const ready: number[] = [];
  for (const s of plan.steps) {
    if (!started.has(s.index) && s.inputs.every((p) => available.has(p.tensor))) ready.push(s.index);
  }
  return ready;
}

function names(list: ModelTensorConfig[]): string {
  return list.map((t) => t.name).join(', ') || 'none';
}

/** Pass 1: wiring (who produces/consumes what), model existence, map keys; fills `tensors` with the steps' outputs and consumers. */
function wireSteps(
  config: ModelConfig,
  lookup: ConfigLookup,
  tensors: Map<string, EnsembleTensorInfo>,
  fail: (w: string) => Error,
): { steps: EnsemblePlanStep[]; models: ModelConfig[] } {
  const ens = config.name;
  const mbs = config.max_batch_size;
  const rawSteps = config.ensemble_scheduling?.step ?? [];
  const models: ModelConfig[] = [];
  const steps: EnsemblePlanStep[] = rawSteps.map((s, i) => {
    const where = `step[${i}] (model '${s.model_name}')`;
    const version = s.model_version ?? -1;
    if (s.model_name === ens) throw fail(`${where}: an ensemble cannot contain itself`);
    const m = lookup(s.model_name, version);
    if (!m) throw fail(`${where}: composing model '${s.model_name}'${version >= 0 ? ` version ${version}` : ''} is not available`);
    if (isEnsemble(m) && containsEnsemble(m, ens, lookup, new Set())) {
      throw fail(`${where}: circular ensemble reference through '${s.model_name}'`);
    }
    // A non-batching step (max_batch_size 0) of a batching ensemble sees the batch dim in its own dims (pass 2).
    if (mbs > 0 && m.max_batch_size > 0 && m.max_batch_size < mbs) {
      throw fail(`${where}: the ensemble allows batch size ${mbs} but '${s.model_name}' only ${m.max_batch_size}`);
    }
    models.push(m);
    const inputs = Object.entries(s.input_map ?? {}).map(([modelInput, tensor]) => {
      if (!m.input.some((x) => x.name === modelInput)) {
        throw fail(`${where}: input_map key '${modelInput}' is not an input of '${s.model_name}' (inputs: ${names(m.input)})`);
      }
      return { modelInput, tensor };
    });
    for (const x of m.input) {
      if (!x.optional && !(x.name in (s.input_map ?? {})))
        throw fail(`${where}: input '${x.name}' of '${s.model_name}' is not mapped in input_map`);
    }
    const outputs = Object.entries(s.output_map ?? {}).map(([modelOutput, tensor]) => {
      if (!m.output.some((x) => x.name === modelOutput)) {
        throw fail(`${where}: output_map key '${modelOutput}' is not an output of '${s.model_name}' (outputs: ${names(m.output)})`);
      }
      const prev = tensors.get(tensor);
      if (prev) {
        const by =
          prev.producer === ENSEMBLE_INPUT
            ? 'it is an ensemble input'
            : `step[${prev.producer}] (model '${rawSteps[prev.producer]!.model_name}') also writes it`;
        throw fail(`${where}: tensor '${tensor}' is written twice: ${by}`);
      }
      tensors.set(tensor, { name: tensor, data_type: '', dims: [], producer: i, consumers: [], isEnsembleOutput: false });
      return { modelOutput, tensor };
    });
    return {
      index: i,
      modelName: s.model_name,
      modelVersion: version,
      inputs,
      outputs,
      addBatchDim: false,
      neededOutputs: [],
      decoupled: false,
    };
  });
  for (const s of steps) {
    for (const { tensor } of s.inputs) {
      const t = tensors.get(tensor);
      if (!t)
        throw fail(`step[${s.index}] (model '${s.modelName}'): input tensor '${tensor}' is not produced by any step nor an ensemble input`);
      if (!t.consumers.includes(s.index)) t.consumers.push(s.index);
    }
  }
  return { steps, models };
}

/** Pass 2, in dependency order: each step's batch mode, then its tensors' types and shapes. */
function typeSteps(
  steps: EnsemblePlanStep[],
  models: ModelConfig[],
  order: number[],
  tensors: Map<string, EnsembleTensorInfo>,
  mbs: number,
  fail: (w: string) => Error,
): void {
  for (const idx of order) {
    const s = steps[idx]!;
    const m = models[idx]!;
    const where = `step[${idx}] (model '${s.modelName}')`;
    // Full form: the ensemble tensor carries the model's batch dim itself. Strip form: a
    // batching ensemble's tensor meets a non-batching model whose first dim is the batch dim.
    const strip = mbs > 0 && m.max_batch_size === 0;
    const expected = (x: ModelTensorConfig, full: boolean) => (full ? [-1, ...x.dims] : strip ? x.dims.slice(1) : x.dims);
    const inCfg = s.inputs.map((p) => ({ ...p, cfg: m.input.find((x) => x.name === p.modelInput)!, t: tensors.get(p.tensor)! }));
    let full = false;
    if (mbs === 0 && m.max_batch_size > 0) {
      const fitsBare = inCfg.every((p) => dimsCompatible(p.cfg.dims, p.t.dims));
      const fitsFull = inCfg.every((p) => dimsCompatible(expected(p.cfg, true), p.t.dims));
      s.addBatchDim = fitsBare || !fitsFull;
      full = !s.addBatchDim;
    }
    if (strip) {
      for (const x of [...inCfg.map((p) => p.cfg), ...s.outputs.map((p) => m.output.find((o) => o.name === p.modelOutput)!)]) {
        if (x.dims.length === 0 || x.dims[0] !== -1) {
          throw fail(
            `${where}: the ensemble batches (max_batch_size ${mbs}) but '${s.modelName}' does not (max_batch_size 0): its '${x.name}' dims [${x.dims}] must start with -1 for the batch dimension`,
          );
        }
      }
    }
    for (const p of inCfg) {
      if (p.t.data_type !== p.cfg.data_type) {
        throw fail(`${where}: tensor '${p.tensor}' is ${p.t.data_type} but input '${p.modelInput}' expects ${p.cfg.data_type}`);
      }
      const want = expected(p.cfg, full);
      if (!dimsCompatible(want, p.t.dims)) {
        throw fail(`${where}: tensor '${p.tensor}' has shape [${p.t.dims}] but input '${p.modelInput}' expects [${want}]`);
      }
    }
    for (const p of s.outputs) {
      const cfg = m.output.find((x) => x.name === p.modelOutput)!;
      const t = tensors.get(p.tensor)!;
      t.data_type = cfg.data_type;
      t.dims = expected(cfg, full);
    }
  }
}

/** Kahn's algorithm over step dependencies; a leftover step means a cycle. */
function topoOrder(steps: EnsemblePlanStep[], tensors: Map<string, EnsembleTensorInfo>, fail: (w: string) => Error): number[] {
  const deps = steps.map((s) => new Set(s.inputs.map((p) => tensors.get(p.tensor)!.producer).filter((p) => p !== ENSEMBLE_INPUT)));
  const order: number[] = [];
  const done = new Set<number>();
  while (order.length < steps.length) {
    const next = steps.findIndex((_, i) => !done.has(i) && [...deps[i]!].every((d) => done.has(d)));
    if (next < 0) {
      const stuck = steps.filter((_, i) => !done.has(i)).map((s) => `step[${s.index}] (model '${s.modelName}')`);
      throw fail(`circular dependency between ${stuck.join(', ')}`);
    }
    done.add(next);
    order.push(next);
  }
  return order;
}

/** Walk back from the outputs to the tensors and steps they depend on. */
function neededBy(outputs: string[], steps: EnsemblePlanStep[], tensors: Map<string, EnsembleTensorInfo>) {
  const neededTensors = new Set<string>();
  const neededSteps = new Set<number>();
  const stack = [...outputs];
  while (stack.length) {
    const name = stack.pop()!;
    if (neededTensors.has(name)) continue;
    neededTensors.add(name);
    const p = tensors.get(name)?.producer ?? ENSEMBLE_INPUT;
    if (p === ENSEMBLE_INPUT || neededSteps.has(p)) continue;
    neededSteps.add(p);
    for (const i of steps[p]!.inputs) stack.push(i.tensor);
  }
  return { neededTensors, neededSteps };
}

/** True when ensemble `m` (transitively) has a step running `target`. */
function containsEnsemble(m: ModelConfig, target: string, lookup: ConfigLookup, seen: Set<string>): boolean {
  if (seen.has(m.name)) return false;
  seen.add(m.name);
  for (const s of m.ensemble_scheduling?.step ?? []) {
    if (s.model_name === target) return true;
    const sub = lookup(s.model_name, s.model_version ?? -1);
    if (sub && isEnsemble(sub) && containsEnsemble(sub, target, lookup, seen)) return true;
  }
  return false;
}
