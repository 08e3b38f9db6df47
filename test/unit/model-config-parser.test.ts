import { describe, expect, it } from 'vitest';
import { parseModelConfigText, parsePbtxt } from '../../engine/config/model-config-parser.ts';
import { messageType, TO_OBJECT } from '../../protocol/index.ts';
import { StatusError } from '../../engine/api/status.ts';

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

const parse = (text: string) => parseModelConfigText(text, 'm/config.pbtxt');
function errorOf(text: string, file = 'm/config.pbtxt'): StatusError {
  try {
    parseModelConfigText(text, file);
  } catch (e) {
    expect(e).toBeInstanceOf(StatusError);
    expect((e as StatusError).code).toBe('INVALID_ARG');
    return e as StatusError;
  }
  throw new Error('expected a parse error');
}

describe('parseModelConfigText', () => {
  it('parses the seed ensemble (Korean comments) to the expected object', () => {
    const c = parse(SEED);
    expect(c).toMatchObject({
      name: 'search_pipeline_ensemble',
      platform: 'ensemble',
      input: [{ name: 'RAW_IMAGE', data_type: 'TYPE_UINT8', dims: [-1] }],
      output: [{ name: 'FINAL_VECTOR', data_type: 'TYPE_FP32', dims: [512] }],
      ensemble_scheduling: {
        step: [
          {
            model_name: 'image_preprocess_model',
            model_version: -1,
            input_map: { image_bytes: 'RAW_IMAGE' },
            output_map: { preprocessed_tensor: 'PREPROCESSED_DATA' },
          },
          {
            model_name: 'clip_encoder_model',
            model_version: -1,
            input_map: { pixel_values: 'PREPROCESSED_DATA' },
            output_map: { image_embeds: 'FINAL_VECTOR' },
          },
        ],
      },
    });
    expect(c.max_batch_size).toBeUndefined(); // not written: autocomplete can tell
  });

  it('round-trips through the reflected inference.ModelConfig (wire encode/decode)', () => {
    const c = parse(SEED + '\nparameters { key: "k" value: { string_value: "v" } }\nversion_policy { all {} }');
    const T = messageType('inference.ModelConfig');
    const back = T.toObject(T.decode(T.encode(T.fromObject(c)).finish()), TO_OBJECT);
    expect(back).toEqual(c);
  });

  it('accepts <> blocks, optional colons, repeated blocks and separators', () => {
    const c = parse(`
      name: "m"; max_batch_size: 8,
      input < name: "a" data_type: TYPE_FP32 dims: 3 dims: 4 >
      input: { name: "b", data_type: 11, dims: [] ; }
      instance_group { kind: KIND_CPU count: 2 } instance_group [ { count: 1 }, { gpus: [0, 1] } ]`);
    expect(c.input).toEqual([
      { name: 'a', data_type: 'TYPE_FP32', dims: [3, 4] },
      { name: 'b', data_type: 'TYPE_FP32', dims: [] },
    ]);
    expect(c.max_batch_size).toBe(8);
    // Canonical form: repeated fields always present as arrays.
    expect(c.instance_group).toEqual([
      { kind: 'KIND_CPU', count: 2, gpus: [], profile: [], secondary_devices: [] },
      { count: 1, gpus: [], profile: [], secondary_devices: [] },
      { gpus: [0, 1], profile: [], secondary_devices: [] },
    ]);
  });

  it('decodes string escapes, both quotes and adjacent concatenation', () => {
    const c = parse(String.raw`name: "a\n\t\"\\" 'b\'c' "\x41\101\u00e9" "한글"`);
    expect(c.name).toBe('a\n\t"\\' + "b'c" + 'AAé' + '한글');
  });

  it('reads numbers: negative, hex, octal, floats, inf and nan', () => {
    const seq = parsePbtxt(
      `control_input { control { int32_false_true: [ -5, 0x10, 010 ] fp32_false_true: [ 1e-5, -2.5f, inf, -inf, nan, .5 ] bool_false_true: [true, False, t, 0, 1] } }`,
      'x',
      'inference.ModelSequenceBatching',
    ) as { control_input: { control: { int32_false_true: number[]; fp32_false_true: number[]; bool_false_true: boolean[] }[] }[] };
    const ctl = seq.control_input[0]!.control[0]!;
    expect(ctl.int32_false_true).toEqual([-5, 16, 8]);
    expect(ctl.fp32_false_true.slice(0, 4)).toEqual([1e-5, -2.5, Infinity, -Infinity]);
    expect(ctl.fp32_false_true[4]).toBeNaN();
    expect(ctl.fp32_false_true[5]).toBe(0.5);
    expect(ctl.bool_false_true).toEqual([true, false, true, false, true]);
  });

  it('reads int64 as numbers, enums by name or number, and maps (message and string values, repeated, list form)', () => {
    const c = parse(`
      dynamic_batching { max_queue_delay_microseconds: 100000 priority_levels: 2 default_priority_level: 1
        priority_queue_policy { key: 2 value { timeout_action: DELAY max_queue_size: 3 } } }
      parameters { key: "x" value: { string_value: "y" } }
      parameters: { key: "z", value: { string_value: "w" } }
      instance_group { kind: 2 }`);
    const e = parse('ensemble_scheduling { step { model_name: "m" input_map [ { key: "a" value: "b" }, { key: "c" value: "d" } ] } }');
    expect(c.dynamic_batching).toEqual({
      max_queue_delay_microseconds: 100000,
      priority_levels: 2,
      default_priority_level: 1,
      priority_queue_policy: { '2': { timeout_action: 'DELAY', max_queue_size: 3 } },
      preferred_batch_size: [],
    });
    expect(c.parameters).toEqual({ x: { string_value: 'y' }, z: { string_value: 'w' } });
    expect(e.ensemble_scheduling!.step[0]!.input_map).toEqual({ a: 'b', c: 'd' });
    expect(c.instance_group![0]!.kind).toBe('KIND_CPU');
  });

  it('reports the broken example with file:line:col and field path', () => {
    const text = [
      'name: "broken_model"',
      'max_batch_size: 8',
      'input [ { name: "x", data_type: TYPE_FP32, dims: [ 4 ] } ]',
      'output [ { name: "y", data_type: TYPE_FP32, dims: [ 4 ] } ]',
      'instance_group [ { count: two, kind: KIND_CPU } ]',
    ].join('\n');
    expect(errorOf(text, 'broken_model/config.pbtxt').message).toBe(
      'broken_model/config.pbtxt:5:27: instance_group[0].count: expected an integer, got "two"',
    );
    const t2 = 'instance_group {\n  kind: KIND_CPU\n    count: "two" }';
    expect(errorOf(t2, 'broken_model/config.pbtxt').message).toBe(
      'broken_model/config.pbtxt:3:12: instance_group[0].count: expected an integer, got string "two"',
    );
  });

  it('names unknown fields with their message type', () => {
    expect(errorOf('input [ { name: "a" },\n  { name: "b" dimz: [1] } ]').message).toBe(
      "m/config.pbtxt:2:15: input[1]: unknown field 'dimz' in ModelInput",
    );
    expect(errorOf('nmae: "x"').message).toBe("m/config.pbtxt:1:1: unknown field 'nmae' in ModelConfig");
  });

  it('lists allowed values for a bad enum', () => {
    const m = errorOf('input { data_type: TYPE_FLOAT }').message;
    expect(m).toMatch(
      /^m\/config\.pbtxt:1:20: input\[0\]\.data_type: unknown DataType value 'TYPE_FLOAT'; expected one of TYPE_INVALID, TYPE_BOOL,/,
    );
    expect(m).toContain('TYPE_BF16');
    expect(errorOf('instance_group { kind: 9 }').message).toMatch(
      /1:24: instance_group\[0\]\.kind: 9 is not a Kind value; expected one of KIND_AUTO/,
    );
  });

  it('rejects bad escapes and unterminated strings, lists and braces, naming where they started', () => {
    expect(errorOf('name: "ab\\qc"').message).toBe("m/config.pbtxt:1:10: name: invalid escape sequence '\\q'");
    expect(errorOf('\n  name: "abc\n').message).toBe('m/config.pbtxt:2:9: name: unterminated string starting here');
    expect(errorOf('ensemble_scheduling {\n  step { model_name: "m" }\n').message).toBe(
      "m/config.pbtxt:3:1: ensemble_scheduling: missing '}' for the '{' opened at 1:21",
    );
    expect(errorOf('input { dims: [1, 2 }').message).toMatch(/1:21: input\[0\]\.dims: expected ',' or '\]', got '}'/);
  });

  it('counts columns in code points after UTF-8 text', () => {
    expect(errorOf('name: "한글" bogus: 1').message).toBe("m/config.pbtxt:1:12: unknown field 'bogus' in ModelConfig");
  });

  it('rejects duplicate singular fields, two oneof members, out-of-range and non-integer values', () => {
    expect(errorOf('name: "a"\nname: "b"').message).toBe("m/config.pbtxt:2:1: name: field 'name' is set more than once");
    expect(errorOf('dynamic_batching {}\nensemble_scheduling {}').message).toMatch(
      /2:1: ensemble_scheduling: 'ensemble_scheduling' and 'dynamic_batching' are members of oneof 'scheduling_choice'/,
    );
    expect(errorOf('max_batch_size: 3000000000').message).toMatch(/max_batch_size: 3000000000 is out of range for int32/);
    expect(errorOf('max_batch_size: 1.5').message).toMatch(/max_batch_size: expected an integer, got "1.5"/);
    expect(errorOf('instance_group { count: -1 } instance_group { gpus: [-1] } response_cache { enable: maybe }').message).toMatch(
      /response_cache\.enable: expected true or false, got "maybe"/,
    );
    expect(errorOf('name "x"').message).toMatch(/1:6: name: expected ':' after 'name', got string "x"/);
  });
});
