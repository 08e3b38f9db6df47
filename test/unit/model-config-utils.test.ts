import { describe, expect, it } from 'vitest';
import { parseModelConfigText } from '../../engine/config/model-config-parser.ts';
import { normalizeModelConfig, modelTensorShape, type IOInfo, type NormalizeOptions } from '../../engine/config/model-config-utils.ts';
import type { ModelConfig } from '../../engine/api/model-config.ts';

const FILE = 'simple/config.pbtxt';
const opts = (o: Partial<NormalizeOptions> = {}): NormalizeOptions => ({ modelName: 'simple', file: FILE, strict: true, ...o });
const load = (text: string, o: Partial<NormalizeOptions> = {}) => normalizeModelConfig(parseModelConfigText(text, FILE), opts(o));
function errorOf(text: string, o: Partial<NormalizeOptions> = {}): string {
  try {
    load(text, o);
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('expected a validation error');
}

const SIMPLE = `
  backend: "onnxruntime"
  max_batch_size: 8
  input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 16 ] } ]
  output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 16 ] } ]`;

describe('normalizeModelConfig defaults', () => {
  it('fills name, platform, filename, version policy and a CPU instance group for onnxruntime', () => {
    const c = load(SIMPLE);
    expect(c.name).toBe('simple');
    expect(c.platform).toBe('onnxruntime_onnx');
    expect(c.backend).toBe('onnxruntime');
    expect(c.default_model_filename).toBe('model.onnx');
    expect(c.version_policy).toEqual({ latest: { num_versions: 1 } });
    expect(c.instance_group).toEqual([{ name: 'simple_0', kind: 'KIND_CPU', count: 2 }]);
    expect(c.dynamic_batching).toBeUndefined();
  });

  it('maps platform to backend, defaults js to one instance and leaves its filename to the loader', () => {
    expect(load('platform: "onnxruntime_onnx"').backend).toBe('onnxruntime');
    const js = load('backend: "js" input { name: "a" data_type: TYPE_STRING dims: [1] }');
    expect(js.platform).toBe('');
    expect(js.default_model_filename).toBe('');
    expect(js.instance_group).toEqual([{ name: 'simple_0', kind: 'KIND_CPU', count: 1 }]);
    expect(load('', { inferredBackend: 'js' }).backend).toBe('js');
  });

  it('names groups, defaults count to 1, and resolves KIND_AUTO by GPU presence', () => {
    const text = `${SIMPLE} instance_group [ { kind: KIND_AUTO }, { name: "g", count: 3, kind: KIND_CPU } ]`;
    expect(load(text).instance_group).toEqual([
      { name: 'simple_0', kind: 'KIND_CPU', count: 1, gpus: [], profile: [], secondary_devices: [] },
      { name: 'g', kind: 'KIND_CPU', count: 3, gpus: [], profile: [], secondary_devices: [] },
    ]);
    const gpu = load(text, { gpuCount: 2 }).instance_group![0]!;
    expect(gpu.kind).toBe('KIND_GPU');
    expect(gpu.gpus).toEqual([0, 1]);
  });

  it('fills dynamic batching and queue policy defaults', () => {
    const c = load(`${SIMPLE} dynamic_batching { preferred_batch_size: [4, 8] priority_levels: 2 default_priority_level: 2
      priority_queue_policy { key: 1 value { max_queue_size: 5 } } }`);
    expect(c.dynamic_batching).toEqual({
      preferred_batch_size: [4, 8],
      max_queue_delay_microseconds: 0,
      preserve_ordering: false,
      priority_levels: 2,
      default_priority_level: 2,
      default_queue_policy: { timeout_action: 'REJECT', default_timeout_microseconds: 0, allow_timeout_override: false, max_queue_size: 0 },
      priority_queue_policy: {
        '1': { timeout_action: 'REJECT', default_timeout_microseconds: 0, allow_timeout_override: false, max_queue_size: 5 },
      },
    });
  });

  it('gives the full tensor shape with a batch dim when the model batches', () => {
    const c = load(SIMPLE);
    expect(modelTensorShape(c, c.input[0]!)).toEqual([-1, 16]);
    expect(modelTensorShape({ ...c, max_batch_size: 0 }, c.input[0]!)).toEqual([16]);
  });

  it('does not modify its argument', () => {
    const raw = parseModelConfigText(SIMPLE, FILE);
    const copy = structuredClone(raw);
    normalizeModelConfig(raw, opts());
    expect(raw).toEqual(copy);
  });
});

describe('autocomplete from ONNX metadata (strict=false)', () => {
  const io = (batch: boolean) => ({
    inputs: [{ name: 'x', datatype: 'FP32', shape: batch ? [-1, 3, 224, 224] : [3, 224, 224] }] as IOInfo[],
    outputs: [{ name: 'y', datatype: 'INT64', shape: batch ? [-1, 10] : [10] }] as IOInfo[],
  });

  it('adds inputs/outputs, max_batch_size 4 and a dynamic batcher for a batchable model', () => {
    const c = load('backend: "onnxruntime"', { strict: false, modelIO: io(true) });
    expect(c.max_batch_size).toBe(4);
    expect(c.input).toEqual([{ name: 'x', data_type: 'TYPE_FP32', dims: [3, 224, 224] }]);
    expect(c.output).toEqual([{ name: 'y', data_type: 'TYPE_INT64', dims: [10] }]);
    expect(c.dynamic_batching?.max_queue_delay_microseconds).toBe(0);
  });

  it('keeps max_batch_size 0 for a model without a dynamic first dim, and an explicit 0', () => {
    const fixed = load('backend: "onnxruntime"', { strict: false, modelIO: io(false) });
    expect(fixed.max_batch_size).toBe(0);
    expect(fixed.input[0]!.dims).toEqual([3, 224, 224]);
    expect(fixed.dynamic_batching).toBeUndefined();
    const explicit = load('backend: "onnxruntime" max_batch_size: 0', {
      strict: false,
      modelIO: { inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 3] }], outputs: [] },
    });
    expect(explicit.max_batch_size).toBe(0);
    expect(explicit.input[0]!.dims).toEqual([-1, 3]);
  });

  it('completes a partly declared input and adds the missing one', () => {
    const c = load('backend: "onnxruntime" max_batch_size: 2 input { name: "x" data_type: TYPE_FP32 }', {
      strict: false,
      modelIO: io(true),
    });
    expect(c.input).toEqual([{ name: 'x', data_type: 'TYPE_FP32', dims: [3, 224, 224] }]);
    expect(c.output.map((o) => o.name)).toEqual(['y']);
  });

  it('strict mode does not autocomplete but checks names, types and shapes against the model', () => {
    expect(errorOf('backend: "onnxruntime"', { modelIO: io(true) })).toBe(
      "simple/config.pbtxt: input: the model file's input 'x' is missing from the config",
    );
    const good =
      'backend: "onnxruntime" max_batch_size: 4 input { name: "x" data_type: TYPE_FP32 dims: [3,224,224] } output { name: "y" data_type: TYPE_INT64 dims: [10] }';
    expect(load(good, { modelIO: io(true) }).max_batch_size).toBe(4);
    expect(errorOf(good.replace('name: "x"', 'name: "image"'), { modelIO: io(true) })).toBe(
      "simple/config.pbtxt: input[0].name: 'image' is not an input of the model file (it has: x)",
    );
    expect(errorOf(good.replace('TYPE_INT64', 'TYPE_INT32'), { modelIO: io(true) })).toBe(
      "simple/config.pbtxt: output[0].data_type: 'y' is TYPE_INT64 in the model file, config says TYPE_INT32",
    );
    expect(errorOf(good.replace('[3,224,224]', '[3,224,225]'), { modelIO: io(true) })).toMatch(
      /input\[0\]\.dims: \[3,224,225\] does not match \[3,224,224\]/,
    );
    expect(errorOf(good, { modelIO: io(false) })).toMatch(
      /^simple\/config\.pbtxt: max_batch_size: 4 but input 'x' has no dynamic batch dim/,
    );
  });
});

describe('validation', () => {
  const cases: [string, string, RegExp][] = [
    ['name mismatch', `name: "other" ${SIMPLE}`, /^simple\/config\.pbtxt: name: 'other' does not match the model directory 'simple'/],
    ['no backend', 'max_batch_size: 1', /backend: unable to determine the backend/],
    ['platform/backend conflict', 'platform: "onnxruntime_onnx" backend: "js"', /backend: 'js' does not match platform 'onnxruntime_onnx'/],
    ['negative max_batch_size', SIMPLE.replace('max_batch_size: 8', 'max_batch_size: -1'), /max_batch_size: must be 0 or more, got -1/],
    [
      'missing data_type',
      'backend: "js" input { name: "a" dims: [1] }',
      /^simple\/config\.pbtxt: input\[0\]\.data_type: 'a' needs a data_type/,
    ],
    ['missing name', 'backend: "js" output { data_type: TYPE_FP32 dims: [1] }', /output\[0\]\.name: every output needs a name/],
    ['empty dims', 'backend: "js" input { name: "a" data_type: TYPE_FP32 }', /input\[0\]\.dims: 'a' needs dims/],
    [
      'zero dim',
      'backend: "js" input { name: "a" data_type: TYPE_FP32 dims: [2, 0] }',
      /input\[0\]\.dims\[1\]: must be -1 or at least 1, got 0/,
    ],
    [
      'dim below -1',
      'backend: "js" input { name: "a" data_type: TYPE_FP32 dims: [-2] }',
      /input\[0\]\.dims\[0\]: must be -1 or at least 1, got -2/,
    ],
    [
      'duplicate names',
      'backend: "js" input [{ name: "a" data_type: TYPE_FP32 dims: [1] }, { name: "a" data_type: TYPE_FP32 dims: [1] }]',
      /input\[1\]\.name: duplicate input name 'a'/,
    ],
    [
      'reshape size',
      'backend: "js" input { name: "a" data_type: TYPE_FP32 dims: [4] reshape { shape: [3] } }',
      /input\[0\]\.reshape: \[3\] has 3 elements but dims \[4\] has 4/,
    ],
    [
      'format dims',
      'backend: "js" input { name: "a" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [3, 4] }',
      /input\[0\]\.format: FORMAT_NCHW needs 3 dims/,
    ],
    [
      'preferred > max',
      `${SIMPLE} dynamic_batching { preferred_batch_size: [4, 16] }`,
      /dynamic_batching\.preferred_batch_size\[1\]: 16 is not within 1\.\.max_batch_size \(8\)/,
    ],
    ['batching without batch dim', 'backend: "js" dynamic_batching {}', /dynamic_batching: requires max_batch_size > 0/],
    [
      'default priority out of range',
      `${SIMPLE} dynamic_batching { priority_levels: 2 default_priority_level: 3 }`,
      /dynamic_batching\.default_priority_level: 3 is not within 1\.\.priority_levels \(2\)/,
    ],
    ['default priority unset', `${SIMPLE} dynamic_batching { priority_levels: 2 }`, /default_priority_level: 0 is not within/],
    [
      'priority policy key',
      `${SIMPLE} dynamic_batching { priority_levels: 1 default_priority_level: 1 priority_queue_policy { key: 2 value {} } }`,
      /priority_queue_policy\[2\]: priority level 2/,
    ],
    ['negative count', `${SIMPLE} instance_group { count: -1 }`, /instance_group\[0\]\.count: must be at least 1, got -1/],
    ['GPU without GPUs', `${SIMPLE} instance_group { kind: KIND_GPU }`, /instance_group\[0\]\.kind: KIND_GPU but no GPUs are available/],
    [
      'gpus on CPU group',
      `${SIMPLE} instance_group { kind: KIND_CPU gpus: [0] }`,
      /instance_group\[0\]\.gpus: must not be set for KIND_CPU/,
    ],
    [
      'empty specific versions',
      `${SIMPLE} version_policy { specific {} }`,
      /version_policy\.specific\.versions: must list at least one version/,
    ],
    ['latest 0', `${SIMPLE} version_policy { latest { num_versions: 0 } }`, /version_policy\.latest\.num_versions: must be at least 1/],
    [
      'ensemble without steps',
      'platform: "ensemble"',
      /ensemble_scheduling: an ensemble needs 'ensemble_scheduling' with at least one step/,
    ],
    [
      'ensemble with instances',
      'platform: "ensemble" ensemble_scheduling { step { model_name: "a" } } instance_group {}',
      /instance_group: must not be set for an ensemble/,
    ],
    ['ensemble with backend', 'platform: "ensemble" backend: "js"', /backend: an ensemble has no backend/],
    [
      'steps outside ensemble',
      `${SIMPLE} ensemble_scheduling { step { model_name: "a" } }`,
      /ensemble_scheduling: only valid with platform 'ensemble'/,
    ],
    ['warmup batch', `${SIMPLE} model_warmup { name: "w" batch_size: 9 }`, /model_warmup\[0\]\.batch_size: 9 is not within 1\.\.8/],
    [
      'warmup input',
      `${SIMPLE} model_warmup { name: "w" batch_size: 1 inputs { key: "nope" value { data_type: TYPE_FP32 dims: [16] zero_data: true } } }`,
      /model_warmup\[0\]\.inputs\[nope\]: 'nope' is not an input/,
    ],
  ];
  for (const [title, text, re] of cases) {
    it(`rejects: ${title}`, () => expect(errorOf(text)).toMatch(re));
  }

  it('accepts a valid ensemble and a specific version policy', () => {
    const e: ModelConfig = load('platform: "ensemble" ensemble_scheduling { step { model_name: "a" } }');
    expect(e.instance_group).toEqual([]);
    expect(e.backend).toBe('');
    expect(load(`${SIMPLE} version_policy { specific { versions: [1, 3] } }`).version_policy).toEqual({ specific: { versions: [1, 3] } });
  });
});
