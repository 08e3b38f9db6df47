import { describe, expect, it } from 'vitest';
import { parseModelConfigText } from '../../engine/config/model-config-parser.ts';
import { normalizeModelConfig } from '../../engine/config/model-config-utils.ts';
import { buildEnsemblePlan, nextReadySteps, ENSEMBLE_INPUT, type EnsemblePlan } from '../../engine/config/ensemble-utils.ts';
import type { ModelConfig } from '../../engine/api/model-config.ts';

function model(name: string, text: string): ModelConfig {
  const file = `${name}/config.pbtxt`;
  return normalizeModelConfig(parseModelConfigText(`name: "${name}"\n${text}`, file), { modelName: name, file, strict: true });
}
const js = (name: string, mbs: number, io: string) => model(name, `backend: "js" max_batch_size: ${mbs}\n${io}`);

const SEED = `name: "search_pipeline_ensemble"
platform: "ensemble"

# 입력: 클라이언트가 보내는 원본 바이너리 이미지
input [ { name: "RAW_IMAGE", data_type: TYPE_UINT8, dims: [ -1 ] } ]
# 출력: 최종적으로 얻게 되는 512차원 벡터
output [ { name: "FINAL_VECTOR", data_type: TYPE_FP32, dims: [ 512 ] } ]

ensemble_scheduling {
  step [
    {
      model_name: "image_preprocess_model" # 첫 번째 실행 모델
      model_version: -1
      input_map { key: "image_bytes", value: "RAW_IMAGE" }
      output_map { key: "preprocessed_tensor", value: "PREPROCESSED_DATA" }
    },
    {
      model_name: "clip_encoder_model"     # 두 번째 실행 모델
      model_version: -1
      # 이전 단계의 출력(PREPROCESSED_DATA)을 이 모델의 입력으로 직접 주입
      input_map { key: "pixel_values", value: "PREPROCESSED_DATA" }
      output_map { key: "image_embeds", value: "FINAL_VECTOR" }
    }
  ]
}
`;

const MODELS = new Map<string, ModelConfig>([
  [
    'image_preprocess_model',
    js(
      'image_preprocess_model',
      0,
      `
    input { name: "image_bytes" data_type: TYPE_UINT8 dims: [-1] }
    output { name: "preprocessed_tensor" data_type: TYPE_FP32 dims: [3, 224, 224] }`,
    ),
  ],
  [
    'clip_encoder_model',
    js(
      'clip_encoder_model',
      16,
      `
    input { name: "pixel_values" data_type: TYPE_FP32 dims: [3, 224, 224] }
    output { name: "image_embeds" data_type: TYPE_FP32 dims: [512] }`,
    ),
  ],
]);
const lookupIn = (m: Map<string, ModelConfig>) => (name: string) => m.get(name);

function ensemble(text: string, name = 'search_pipeline_ensemble'): ModelConfig {
  const file = `${name}/config.pbtxt`;
  return normalizeModelConfig(parseModelConfigText(text, file), { modelName: name, file, strict: true });
}
function planError(text: string, models = MODELS): string {
  try {
    buildEnsemblePlan(ensemble(text), lookupIn(models), 'search_pipeline_ensemble/config.pbtxt');
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('expected an ensemble error');
}

describe('buildEnsemblePlan on the seed ensemble', () => {
  const plan = buildEnsemblePlan(ensemble(SEED), lookupIn(MODELS), 'search_pipeline_ensemble/config.pbtxt');

  it('maps producers, consumers and order', () => {
    expect(plan.order).toEqual([0, 1]);
    expect(plan.tensors.get('RAW_IMAGE')).toMatchObject({ producer: ENSEMBLE_INPUT, consumers: [0] });
    expect(plan.tensors.get('PREPROCESSED_DATA')).toMatchObject({
      producer: 0,
      consumers: [1],
      data_type: 'TYPE_FP32',
      dims: [3, 224, 224],
    });
    expect(plan.tensors.get('FINAL_VECTOR')).toMatchObject({ producer: 1, consumers: [], isEnsembleOutput: true, dims: [512] });
    expect(plan.steps[1]!.inputs).toEqual([{ modelInput: 'pixel_values', tensor: 'PREPROCESSED_DATA' }]);
  });

  it('adds a batch dim of 1 on the batching encoder inside the non-batching ensemble', () => {
    expect(plan.steps.map((s) => s.addBatchDim)).toEqual([false, true]);
  });

  it('walks the steps with nextReadySteps', () => {
    expect(nextReadySteps(plan, new Set(['RAW_IMAGE']), new Set())).toEqual([0]);
    expect(nextReadySteps(plan, new Set(['RAW_IMAGE']), new Set([0]))).toEqual([]);
    expect(nextReadySteps(plan, new Set(['RAW_IMAGE', 'PREPROCESSED_DATA']), new Set([0]))).toEqual([1]);
  });
});

describe('batch handling', () => {
  it('uses the full form when the ensemble tensor already carries the batch dim', () => {
    const text = SEED.replace('dims: [ 512 ]', 'dims: [ -1, 512 ]');
    const models = new Map(MODELS);
    models.set(
      'image_preprocess_model',
      js(
        'image_preprocess_model',
        0,
        `
      input { name: "image_bytes" data_type: TYPE_UINT8 dims: [-1] }
      output { name: "preprocessed_tensor" data_type: TYPE_FP32 dims: [1, 3, 224, 224] }`,
      ),
    );
    const plan = buildEnsemblePlan(ensemble(text), lookupIn(models), 'f');
    expect(plan.steps[1]!.addBatchDim).toBe(false);
    expect(plan.tensors.get('FINAL_VECTOR')!.dims).toEqual([-1, 512]);
  });

  it('rejects a batching ensemble over a batching model with a smaller max_batch_size', () => {
    const text = SEED.replace('platform: "ensemble"', 'platform: "ensemble" max_batch_size: 32');
    expect(planError(text)).toMatch(
      /step\[1\] \(model 'clip_encoder_model'\): the ensemble allows batch size 32 but 'clip_encoder_model' only 16/,
    );
  });

  // Triton accepts a max_batch_size 0 step in a batching ensemble when its dims hold the batch dim.
  const BATCHING = `name: "b" platform: "ensemble" max_batch_size: 8
    input [ { name: "IN", data_type: TYPE_FP32, dims: [ 16 ] } ]
    output [ { name: "OUT", data_type: TYPE_FP32, dims: [ 16 ] } ]
    ensemble_scheduling { step [
      { model_name: "nobatch" input_map { key: "X", value: "IN" } output_map { key: "Y", value: "MID" } },
      { model_name: "batch" input_map { key: "X", value: "MID" } output_map { key: "Y", value: "OUT" } } ] }`;
  const withNoBatch = (dims: string) =>
    new Map([
      [
        'nobatch',
        js('nobatch', 0, `input { name: "X" data_type: TYPE_FP32 dims: ${dims} } output { name: "Y" data_type: TYPE_FP32 dims: ${dims} }`),
      ],
      ['batch', js('batch', 8, 'input { name: "X" data_type: TYPE_FP32 dims: [16] } output { name: "Y" data_type: TYPE_FP32 dims: [16] }')],
    ]);

  it('accepts a max_batch_size 0 step whose dims cover the full shape, batch dim included', () => {
    const plan = buildEnsemblePlan(ensemble(BATCHING, 'b'), lookupIn(withNoBatch('[-1, 16]')), 'b/config.pbtxt');
    expect(plan.tensors.get('MID')!.dims).toEqual([16]);
    expect(plan.steps.map((s) => s.addBatchDim)).toEqual([false, false]);
  });

  it('refuses a max_batch_size 0 step whose dims leave out the batch dim, naming it', () => {
    const m = withNoBatch('[16]');
    expect(() => buildEnsemblePlan(ensemble(BATCHING, 'b'), lookupIn(m), 'b/config.pbtxt')).toThrow(
      /step\[0\] \(model 'nobatch'\): the ensemble batches \(max_batch_size 8\) but 'nobatch' does not \(max_batch_size 0\): its 'X' dims \[16\] must start with -1/,
    );
  });

  it('refuses a max_batch_size 0 step whose other dims do not match', () => {
    expect(() => buildEnsemblePlan(ensemble(BATCHING, 'b'), lookupIn(withNoBatch('[-1, 8]')), 'b/config.pbtxt')).toThrow(
      /tensor 'IN' has shape \[16\] but input 'X' expects \[8\]/,
    );
  });
});

describe('reshape on the ensemble itself', () => {
  it('its tensors inside are in the reshape shape, on inputs and outputs', () => {
    const text = `name: "r" platform: "ensemble" max_batch_size: 4
      input [ { name: "X", data_type: TYPE_FP32, dims: [ 2, 3 ], reshape: { shape: [ 6 ] } } ]
      output [ { name: "Y", data_type: TYPE_FP32, dims: [ 2, 3 ], reshape: { shape: [ 6 ] } } ]
      ensemble_scheduling { step [ { model_name: "flat" input_map { key: "X", value: "X" } output_map { key: "Y", value: "Y" } } ] }`;
    const models = new Map([
      ['flat', js('flat', 4, 'input { name: "X" data_type: TYPE_FP32 dims: [6] } output { name: "Y" data_type: TYPE_FP32 dims: [6] }')],
    ]);
    const plan = buildEnsemblePlan(ensemble(text, 'r'), lookupIn(models), 'r/config.pbtxt');
    expect(plan.tensors.get('X')!.dims).toEqual([6]);
    expect(plan.tensors.get('Y')!.dims).toEqual([6]);
  });
});

describe('ensemble checks', () => {
  const prefix = "search_pipeline_ensemble/config.pbtxt: ensemble 'search_pipeline_ensemble': ";
  it('composing model missing', () => {
    const m = new Map(MODELS);
    m.delete('clip_encoder_model');
    expect(planError(SEED, m)).toBe(`${prefix}step[1] (model 'clip_encoder_model'): composing model 'clip_encoder_model' is not available`);
  });
  it('ensemble input not used', () => {
    const text = SEED.replace('input [ {', 'input [ { name: "UNUSED", data_type: TYPE_FP32, dims: [1] }, {');
    expect(planError(text)).toBe(`${prefix}input 'UNUSED' is not used by any step`);
  });
  it('ensemble output not written', () => {
    const text = SEED.replace('output [ {', 'output [ { name: "NOWHERE", data_type: TYPE_FP32, dims: [1] }, {');
    expect(planError(text)).toBe(`${prefix}output 'NOWHERE' is not written by any step`);
  });
  it('tensor written by two steps', () => {
    const text = SEED.replace('value: "PREPROCESSED_DATA" }\n    },', 'value: "FINAL_VECTOR" }\n    },').replace(
      'input_map { key: "pixel_values", value: "PREPROCESSED_DATA" }',
      'input_map { key: "pixel_values", value: "FINAL_VECTOR" }',
    );
    expect(planError(text)).toMatch(
      /step\[1\] \(model 'clip_encoder_model'\): tensor 'FINAL_VECTOR' is written twice: step\[0\] \(model 'image_preprocess_model'\) also writes it/,
    );
  });
  it('step writes an ensemble input', () => {
    const text = SEED.replace('value: "PREPROCESSED_DATA" }\n    },', 'value: "RAW_IMAGE" }\n    },');
    expect(planError(text)).toMatch(/step\[0\] .*tensor 'RAW_IMAGE' is written twice: it is an ensemble input/);
  });
  it('input_map key not an input of the model', () => {
    expect(planError(SEED.replace('key: "pixel_values"', 'key: "pixels"'))).toBe(
      `${prefix}step[1] (model 'clip_encoder_model'): input_map key 'pixels' is not an input of 'clip_encoder_model' (inputs: pixel_values)`,
    );
  });
  it('model input left unmapped', () => {
    const text = SEED.replace('input_map { key: "pixel_values", value: "PREPROCESSED_DATA" }', '');
    expect(planError(text)).toMatch(/step\[1\] \(model 'clip_encoder_model'\): input 'pixel_values' of 'clip_encoder_model' is not mapped/);
  });
  it('output_map key not an output of the model', () => {
    expect(planError(SEED.replace('key: "image_embeds"', 'key: "embeds"'))).toBe(
      `${prefix}step[1] (model 'clip_encoder_model'): output_map key 'embeds' is not an output of 'clip_encoder_model' (outputs: image_embeds)`,
    );
  });
  it('step input that nobody produces', () => {
    expect(
      planError(
        SEED.replace('input_map { key: "pixel_values", value: "PREPROCESSED_DATA" }', 'input_map { key: "pixel_values", value: "GHOST" }'),
      ),
    ).toBe(`${prefix}step[1] (model 'clip_encoder_model'): input tensor 'GHOST' is not produced by any step nor an ensemble input`);
  });
  it('datatype mismatch between producer and consumer', () => {
    const m = new Map(MODELS);
    m.set(
      'clip_encoder_model',
      js(
        'clip_encoder_model',
        16,
        `
      input { name: "pixel_values" data_type: TYPE_FP16 dims: [3, 224, 224] }
      output { name: "image_embeds" data_type: TYPE_FP32 dims: [512] }`,
      ),
    );
    expect(planError(SEED, m)).toBe(
      `${prefix}step[1] (model 'clip_encoder_model'): tensor 'PREPROCESSED_DATA' is TYPE_FP32 but input 'pixel_values' expects TYPE_FP16`,
    );
  });
  it('datatype mismatch against the ensemble input declaration', () => {
    expect(planError(SEED.replace('data_type: TYPE_UINT8', 'data_type: TYPE_INT8'))).toMatch(
      /step\[0\] .*tensor 'RAW_IMAGE' is TYPE_INT8 but input 'image_bytes' expects TYPE_UINT8/,
    );
  });
  it('datatype and shape mismatch against the ensemble output declaration', () => {
    expect(planError(SEED.replace('name: "FINAL_VECTOR", data_type: TYPE_FP32', 'name: "FINAL_VECTOR", data_type: TYPE_FP64'))).toMatch(
      /output 'FINAL_VECTOR' \(written by step\[1\], model 'clip_encoder_model'\): the step produces TYPE_FP32, the ensemble declares TYPE_FP64/,
    );
    expect(planError(SEED.replace('dims: [ 512 ]', 'dims: [ 256 ]'))).toMatch(
      /output 'FINAL_VECTOR' .*produces shape \[512\], the ensemble declares \[256\]/,
    );
  });
  it('shape mismatch between producer and consumer', () => {
    const m = new Map(MODELS);
    m.set(
      'image_preprocess_model',
      js(
        'image_preprocess_model',
        0,
        `
      input { name: "image_bytes" data_type: TYPE_UINT8 dims: [-1] }
      output { name: "preprocessed_tensor" data_type: TYPE_FP32 dims: [3, 256, 256] }`,
      ),
    );
    expect(planError(SEED, m)).toBe(
      `${prefix}step[1] (model 'clip_encoder_model'): tensor 'PREPROCESSED_DATA' has shape [3,256,256] but input 'pixel_values' expects [3,224,224]`,
    );
  });
  it('cycle between steps', () => {
    const m = new Map<string, ModelConfig>([
      [
        'a',
        js(
          'a',
          0,
          'input [{ name: "i" data_type: TYPE_FP32 dims: [1] }, { name: "j" data_type: TYPE_FP32 dims: [1] }] output { name: "o" data_type: TYPE_FP32 dims: [1] }',
        ),
      ],
      ['b', js('b', 0, 'input { name: "i" data_type: TYPE_FP32 dims: [1] } output { name: "o" data_type: TYPE_FP32 dims: [1] }')],
    ]);
    const text = `platform: "ensemble" input { name: "IN" data_type: TYPE_FP32 dims: [1] } output { name: "OUT" data_type: TYPE_FP32 dims: [1] }
      ensemble_scheduling { step [
        { model_name: "a" input_map [{ key: "i" value: "IN" }, { key: "j" value: "T2" }] output_map { key: "o" value: "T1" } },
        { model_name: "b" input_map { key: "i" value: "T1" } output_map { key: "o" value: "T2" } },
        { model_name: "b" input_map { key: "i" value: "IN" } output_map { key: "o" value: "OUT" } } ] }`;
    expect(planError(text, m)).toBe(`${prefix}circular dependency between step[0] (model 'a'), step[1] (model 'b')`);
  });
  it('an ensemble containing itself', () => {
    const text = SEED.replace('model_name: "clip_encoder_model"', 'model_name: "search_pipeline_ensemble"');
    expect(planError(text)).toMatch(/step\[1\] \(model 'search_pipeline_ensemble'\): an ensemble cannot contain itself/);
  });
});

describe('diamond DAG', () => {
  const unary = (n: string) =>
    js(n, 4, 'input { name: "x" data_type: TYPE_FP32 dims: [2] } output { name: "y" data_type: TYPE_FP32 dims: [2] }');
  const models = new Map<string, ModelConfig>([
    [
      'split',
      js(
        'split',
        4,
        'input { name: "x" data_type: TYPE_FP32 dims: [2] } output [{ name: "l" data_type: TYPE_FP32 dims: [2] }, { name: "r" data_type: TYPE_FP32 dims: [2] }, { name: "extra" data_type: TYPE_FP32 dims: [2] }]',
      ),
    ],
    ['left', unary('left')],
    ['right', unary('right')],
    [
      'join',
      js(
        'join',
        4,
        'input [{ name: "a" data_type: TYPE_FP32 dims: [2] }, { name: "b" data_type: TYPE_FP32 dims: [2] }] output { name: "y" data_type: TYPE_FP32 dims: [-1] }',
      ),
    ],
    ['side', unary('side')],
  ]);
  // Steps listed out of dependency order on purpose.
  const text = `platform: "ensemble" max_batch_size: 4
    input { name: "IN" data_type: TYPE_FP32 dims: [2] }
    output { name: "OUT" data_type: TYPE_FP32 dims: [-1] }
    ensemble_scheduling { step [
      { model_name: "join" input_map [{ key: "a" value: "L" }, { key: "b" value: "R" }] output_map { key: "y" value: "OUT" } },
      { model_name: "left" input_map { key: "x" value: "A" } output_map { key: "y" value: "L" } },
      { model_name: "split" input_map { key: "x" value: "IN" } output_map [{ key: "l" value: "A" }, { key: "r" value: "B" }, { key: "extra" value: "X" }] },
      { model_name: "right" input_map { key: "x" value: "B" } output_map { key: "y" value: "R" } },
      { model_name: "side" input_map { key: "x" value: "X" } output_map { key: "y" value: "UNUSED" } } ] }`;
  const plan: EnsemblePlan = buildEnsemblePlan(ensemble(text, 'diamond'), lookupIn(models), 'diamond/config.pbtxt');

  it('orders producers first and fans out/in', () => {
    expect(plan.order.indexOf(2)).toBeLessThan(plan.order.indexOf(1));
    expect(plan.order.indexOf(1)).toBeLessThan(plan.order.indexOf(0));
    expect(plan.order.indexOf(3)).toBeLessThan(plan.order.indexOf(0));
    expect(plan.steps.every((s) => !s.addBatchDim)).toBe(true);
    let available = new Set(['IN']);
    const started = new Set<number>();
    const waves: number[][] = [];
    for (;;) {
      const ready = nextReadySteps(plan, available, started);
      if (ready.length === 0) break;
      waves.push(ready);
      for (const i of ready) {
        started.add(i);
        available = new Set([...available, ...plan.steps[i]!.outputs.map((o) => o.tensor)]);
      }
    }
    expect(waves).toEqual([[2], [1, 3, 4], [0]]);
    // Join waits for both branches.
    expect(nextReadySteps(plan, new Set(['IN', 'A', 'B', 'X', 'L']), new Set([1, 2, 3, 4]))).toEqual([]);
  });

  it('marks which tensors and steps the outputs need', () => {
    expect([...plan.neededTensors].sort()).toEqual(['A', 'B', 'IN', 'L', 'OUT', 'R']);
    expect([...plan.neededSteps].sort()).toEqual([0, 1, 2, 3]);
    expect(plan.steps[2]!.neededOutputs).toEqual(['l', 'r']);
    expect(plan.steps[4]!.neededOutputs).toEqual([]);
  });
});
