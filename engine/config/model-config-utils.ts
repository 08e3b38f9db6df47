// Triton's model_config_utils for this engine: normalize a parsed config
// (fill defaults, reconcile platform/backend, autocomplete from the model
// file's tensors when not strict: onnxruntime's rules), then validate it, once at load. Errors are INVALID_ARG and
// name the config file and the field path. Pure functions; no I/O. The
// checks themselves live in model-config-validation.ts.
import { invalidArg } from '../api/status.ts';
import { validateAgainstModel, validateModelConfig, type Fail } from './model-config-validation.ts';
import { fromConfigType, toConfigType, type Datatype } from '../api/datatypes.ts';
import { engineSuppliedInputs, sequenceSpecOf, stateOutputs } from './sequence-config.ts';
import type { ModelConfig, ModelTensorConfig, ModelInstanceGroup, DynamicBatching, QueuePolicy } from '../api/model-config.ts';
import { ENSEMBLE_PLATFORM, isEnsemble, type IOInfo } from './model-config-tensors.ts';

// Importers keep reading these from model-config-utils.ts.
export {
  ENSEMBLE_PLATFORM,
  dimsCompatible,
  findInput,
  findOutput,
  isEnsemble,
  modelTensorShape,
  tensorDatatype,
  type IOInfo,
} from './model-config-tensors.ts';

export interface NormalizeOptions {
  /** The model's directory name. */
  modelName: string;
  /** Config path used in messages, e.g. 'simple/config.pbtxt'. */
  file: string;
  /** --strict-model-config: no autocomplete from the model file. */
  strict: boolean;
  /** Inputs/outputs the backend read from the model file (its `readModelIO` hook), when the loader has them. */
  modelIO?: { inputs: IOInfo[]; outputs: IOInfo[] };
  /** GPUs visible to the engine (default 0: CPU only). */
  gpuCount?: number;
  /** Backend guessed from the version directory's files when the config names none. */
  inferredBackend?: string;
}

/** Triton's default-max-batch-size used by autocomplete. */
export const DEFAULT_MAX_BATCH_SIZE = 4;

const PLATFORM_TO_BACKEND: Record<string, string> = {
  onnxruntime_onnx: 'onnxruntime',
  tensorrt_plan: 'tensorrt',
  tensorflow_graphdef: 'tensorflow',
  tensorflow_savedmodel: 'tensorflow',
  pytorch_libtorch: 'pytorch',
};
const BACKEND_TO_PLATFORM: Record<string, string> = { onnxruntime: 'onnxruntime_onnx' };
const DEFAULT_FILENAME: Record<string, string> = { onnxruntime: 'model.onnx' };
/** Instances per CPU group when the config has no instance_group. */
const DEFAULT_CPU_COUNT: Record<string, number> = { onnxruntime: 2, js: 1 };

/** Fill defaults, autocomplete when allowed, then validate; returns a new config. */
export function normalizeModelConfig(raw: ModelConfig, opts: NormalizeOptions): ModelConfig {
  const c = structuredClone(raw) as ModelConfig;
  const fail = (path: string, what: string) => invalidArg(`${opts.file}: ${path ? `${path}: ` : ''}${what}`);

  if (!c.name) c.name = opts.modelName;
  else if (c.name !== opts.modelName) {
    throw fail('name', `'${c.name}' does not match the model directory '${opts.modelName}'`);
  }
  c.platform ??= '';
  c.backend ??= '';
  c.input ??= [];
  c.output ??= [];
  reconcileBackend(c, opts, fail);

  if (!opts.strict && opts.modelIO && c.backend === 'onnxruntime') autocomplete(c, raw, withoutEngineTensors(c, opts.modelIO));
  c.max_batch_size ??= 0;
  for (const t of [...c.input, ...c.output]) t.dims ??= [];

  c.default_model_filename ||= DEFAULT_FILENAME[c.backend ?? ''] ?? '';
  c.version_policy = normalizeVersionPolicy(c, fail);
  if (!isEnsemble(c)) c.instance_group = normalizeInstanceGroups(c, opts, fail);
  if (c.dynamic_batching) c.dynamic_batching = normalizeDynamicBatching(c.dynamic_batching);
  c.parameters ??= {};

  validateModelConfig(c, opts.file);
  if (c.sequence_batching) sequenceSpecOf(c, opts.file);
  if (opts.modelIO) validateAgainstModel(c, withoutEngineTensors(c, opts.modelIO), fail);
  return c;
}

function reconcileBackend(c: ModelConfig, opts: NormalizeOptions, fail: Fail): void {
  if (isEnsemble(c)) {
    if (c.backend) throw fail('backend', `an ensemble has no backend, got '${c.backend}'`);
    return;
  }
  if (c.platform) {
    const b = PLATFORM_TO_BACKEND[c.platform];
    if (!b) throw fail('platform', `unknown platform '${c.platform}'`);
    if (c.backend && c.backend !== b) throw fail('backend', `'${c.backend}' does not match platform '${c.platform}'`);
    c.backend = b;
  }
  if (!c.backend) {
    if (!opts.inferredBackend) throw fail('backend', "unable to determine the backend: set 'backend' or 'platform'");
    c.backend = opts.inferredBackend;
  }
  c.platform ||= BACKEND_TO_PLATFORM[c.backend] ?? '';
}

/** The model file's tensors less those the engine supplies (batch inputs, sequence controls and states): clients never see them. */
function withoutEngineTensors(c: ModelConfig, io: { inputs: IOInfo[]; outputs: IOInfo[] }): { inputs: IOInfo[]; outputs: IOInfo[] } {
  const batchInputs = new Set((c.batch_input ?? []).flatMap((b) => b.target_name ?? []));
  if (batchInputs.size) io = { inputs: io.inputs.filter((t) => !batchInputs.has(t.name)), outputs: io.outputs };
  if (!c.sequence_batching) return io;
  const ins = engineSuppliedInputs(c);
  const outs = new Set(stateOutputs(c));
  return { inputs: io.inputs.filter((t) => !ins.has(t.name)), outputs: io.outputs.filter((t) => !outs.has(t.name)) };
}

/** The onnxruntime backend's autocomplete: batching and missing inputs/outputs from the model. */
function autocomplete(c: ModelConfig, raw: ModelConfig, io: { inputs: IOInfo[]; outputs: IOInfo[] }): void {
  const all = [...io.inputs, ...io.outputs];
  if (raw.max_batch_size === undefined) {
    const batchable = all.length > 0 && all.every((t) => t.shape.length > 0 && t.shape[0] === -1);
    c.max_batch_size = batchable ? DEFAULT_MAX_BATCH_SIZE : 0;
    const hasScheduler = c.dynamic_batching || c.sequence_batching || c.ensemble_scheduling;
    if (c.max_batch_size > 1 && !hasScheduler) c.dynamic_batching = {};
  }
  const strip = c.max_batch_size > 0 ? 1 : 0;
  const complete = (list: ModelTensorConfig[], infos: IOInfo[]) => {
    for (const info of infos) {
      const dims = info.shape.slice(strip);
      const t = list.find((x) => x.name === info.name);
      if (!t) list.push({ name: info.name, data_type: toConfigType(info.datatype), dims });
      else {
        if (!t.data_type || t.data_type === 'TYPE_INVALID') t.data_type = toConfigType(info.datatype);
        if (!t.dims || t.dims.length === 0) t.dims = dims;
      }
    }
  };
  complete(c.input, io.inputs);
  complete(c.output, io.outputs);
}

function normalizeVersionPolicy(c: ModelConfig, fail: Fail): ModelConfig['version_policy'] {
  const p = c.version_policy;
  if (!p || (!p.latest && !p.all && !p.specific)) return { latest: { num_versions: 1 } };
  if (p.latest) {
    const n = p.latest.num_versions ?? 0;
    if (n < 1) throw fail('version_policy.latest.num_versions', `must be at least 1, got ${n}`);
    return { latest: { num_versions: n } };
  }
  if (p.specific) {
    const v = p.specific.versions ?? [];
    if (v.length === 0) throw fail('version_policy.specific.versions', 'must list at least one version');
    v.forEach((x, i) => {
      if (x < 1) throw fail(`version_policy.specific.versions[${i}]`, `versions start at 1, got ${x}`);
    });
    return { specific: { versions: v } };
  }
  return { all: {} };
}

function normalizeInstanceGroups(c: ModelConfig, opts: NormalizeOptions, fail: Fail): ModelInstanceGroup[] {
  const gpuCount = opts.gpuCount ?? 0;
  const groups = c.instance_group ?? [];
  if (groups.length === 0) {
    if (gpuCount > 0 && c.backend === 'onnxruntime') {
      return [{ name: `${c.name}_0`, kind: 'KIND_GPU', count: 1, gpus: [...Array(gpuCount).keys()] }];
    }
    return [{ name: `${c.name}_0`, kind: 'KIND_CPU', count: DEFAULT_CPU_COUNT[c.backend ?? ''] ?? 1 }];
  }
  return groups.map((g, i) => {
    const path = `instance_group[${i}]`;
    const out: ModelInstanceGroup = { ...g, name: g.name || `${c.name}_${i}`, kind: g.kind ?? 'KIND_AUTO', count: g.count ?? 0 };
    if (out.count === 0) out.count = 1;
    if (out.count < 1) throw fail(`${path}.count`, `must be at least 1, got ${out.count}`);
    const gpus = out.gpus ?? [];
    if (out.kind === 'KIND_AUTO') out.kind = gpuCount > 0 ? 'KIND_GPU' : 'KIND_CPU';
    if (out.kind === 'KIND_GPU') {
      if (gpuCount === 0)
        throw fail(
          `${path}.kind`,
          `KIND_GPU but no GPUs are available to onnxruntime (it needs a GPU and onnxruntime-node's CUDA execution provider: see docs/deploy/gpu-hosts.md)`,
        );
      gpus.forEach((id, j) => {
        if (id < 0 || id >= gpuCount) throw fail(`${path}.gpus[${j}]`, `GPU ${id} is not available (${gpuCount} visible)`);
      });
      out.gpus = gpus.length ? gpus : [...Array(gpuCount).keys()];
    } else if (gpus.length) {
      throw fail(`${path}.gpus`, `must not be set for ${out.kind}`);
    }
    return out;
  });
}

function normalizeQueuePolicy(p: QueuePolicy | undefined): QueuePolicy {
  return {
    timeout_action: p?.timeout_action ?? 'REJECT',
    default_timeout_microseconds: p?.default_timeout_microseconds ?? 0,
    allow_timeout_override: p?.allow_timeout_override ?? false,
    max_queue_size: p?.max_queue_size ?? 0,
  };
}

function normalizeDynamicBatching(d: DynamicBatching): DynamicBatching {
  const prio: Record<string, QueuePolicy> = {};
  for (const [k, p] of Object.entries(d.priority_queue_policy ?? {})) prio[k] = normalizeQueuePolicy(p);
  return {
    ...d,
    preferred_batch_size: d.preferred_batch_size ?? [],
    max_queue_delay_microseconds: d.max_queue_delay_microseconds ?? 0,
    preserve_ordering: d.preserve_ordering ?? false,
    priority_levels: d.priority_levels ?? 0,
    default_priority_level: d.default_priority_level ?? 0,
    default_queue_policy: normalizeQueuePolicy(d.default_queue_policy),
    priority_queue_policy: prio,
  };
}
