// The sequence batcher's config and request reading: strategy settings,
// control values, correlation IDs and the tensors given to the model.
import { describe, expect, it } from 'vitest';
import { controlTensors, sequenceFlagsOf, sequenceKey, sequenceSpecOf, withSequenceInputs } from '../../engine/config/sequence-config.ts';
import type { ModelConfig } from '../../engine/api/model-config.ts';

const config = (sb: Record<string, unknown>, maxBatch = 4): ModelConfig =>
  ({
    name: 'm',
    max_batch_size: maxBatch,
    input: [{ name: 'IN', data_type: 'TYPE_FP32', dims: [1] }],
    output: [{ name: 'OUT', data_type: 'TYPE_FP32', dims: [1] }],
    sequence_batching: sb,
  }) as ModelConfig;

const CONTROLS = [
  { name: 'S', control: [{ kind: 'CONTROL_SEQUENCE_START', fp32_false_true: [0, 1] }] },
  { name: 'E', control: [{ kind: 'CONTROL_SEQUENCE_END', int32_false_true: [5, 9] }] },
  { name: 'R', control: [{ kind: 'CONTROL_SEQUENCE_READY', bool_false_true: [false, true] }] },
  { name: 'C', control: [{ kind: 'CONTROL_SEQUENCE_CORRID', data_type: 'TYPE_UINT64' }] },
];

describe('sequenceSpecOf', () => {
  it('reads the oldest strategy and defaults the idle time to 1 s', () => {
    const s = sequenceSpecOf(
      config({ oldest: { max_candidate_sequences: 3, preferred_batch_size: [2], max_queue_delay_microseconds: 100 } }),
    );
    expect([s.strategy, s.maxCandidates, s.preferredSizes, s.maxQueueDelayNs, s.maxIdleNs]).toEqual([
      'oldest',
      3,
      [2],
      100_000n,
      1_000_000_000n,
    ]);
    expect(sequenceSpecOf(config({ direct: {}, max_sequence_idle_microseconds: 5 })).strategy).toBe('direct');
  });

  it('refuses a control without exactly one false/true pair, naming the field', () => {
    expect(() => sequenceSpecOf(config({ control_input: [{ name: 'S', control: [{ kind: 'CONTROL_SEQUENCE_START' }] }] }))).toThrow(
      /m\/config.pbtxt: sequence_batching.control_input\[0\].control\[0\]: 'S' needs exactly one of/,
    );
    expect(() =>
      sequenceSpecOf(config({ control_input: [{ name: 'C', control: [{ kind: 'CONTROL_SEQUENCE_CORRID', data_type: 'TYPE_FP32' }] }] })),
    ).toThrow(/expected TYPE_UINT64/);
  });
});

describe('sequenceFlagsOf', () => {
  it('reads uint64 and string IDs; 0 and empty mean none', () => {
    expect(sequenceFlagsOf({ sequence_id: 7, sequence_start: true })).toEqual({ id: 7n, start: true, end: false });
    // Past 2^53 the frontends give a bigint; it stays exact, and so does its key.
    const big = 2n ** 60n + 1n;
    expect(sequenceFlagsOf({ sequence_id: big }).id).toBe(big);
    expect(sequenceKey(big)).not.toBe(sequenceKey(2n ** 60n));
    expect(sequenceKey(7n)).not.toBe(sequenceKey('7'));
    expect(sequenceFlagsOf({ sequence_id: 2n ** 64n - 1n }).id).toBe(2n ** 64n - 1n);
    expect(() => sequenceFlagsOf({ sequence_id: 2 ** 60 })).toThrow(/not exact/);
    expect(() => sequenceFlagsOf({ sequence_id: 2n ** 64n })).toThrow(/unsigned 64-bit integer or a string, got 18446744073709551616/);
    expect(() => sequenceFlagsOf({ sequence_id: true })).toThrow(/unsigned 64-bit integer or a string, got boolean true/);
    expect(sequenceFlagsOf({ sequence_id: 'abc', sequence_end: true })).toEqual({ id: 'abc', start: false, end: true });
    expect(sequenceFlagsOf({ sequence_id: 0 }).id).toBeUndefined();
    expect(sequenceFlagsOf({ sequence_id: '' }).id).toBeUndefined();
    expect(() => sequenceFlagsOf({ sequence_id: -1 })).toThrow(/unsigned 64-bit integer or a string/);
  });
});

describe('controlTensors', () => {
  it('gives each control its configured false/true value, shape [1, 1] when batching', () => {
    const spec = sequenceSpecOf(config({ control_input: CONTROLS }));
    const t = controlTensors(spec, { id: 12n, start: true, end: false }, true);
    expect(t.map((x) => [x.name, x.datatype, x.shape])).toEqual([
      ['S', 'FP32', [1, 1]],
      ['E', 'INT32', [1, 1]],
      ['R', 'BOOL', [1, 1]],
      ['C', 'UINT64', [1, 1]],
    ]);
    expect(new Float32Array(t[0]!.data.buffer)[0]).toBe(1);
    expect(new Int32Array(t[1]!.data.buffer)[0]).toBe(5);
    expect(t[2]!.data[0]).toBe(1);
    expect(new BigUint64Array(t[3]!.data.buffer)[0]).toBe(12n);
    expect(() => controlTensors(spec, { id: 'x', start: true, end: false }, true)).toThrow(/is a string but/);
  });

  it('passes the exact correlation ID to a CORRID control of each type', () => {
    const id = 2n ** 63n + 2n ** 40n + 3n; // past 2^53 and 2^63
    const corr = (dt: string) =>
      controlTensors(
        sequenceSpecOf(config({ control_input: [{ name: 'C', control: [{ kind: 'CONTROL_SEQUENCE_CORRID', data_type: dt }] }] })),
        { id, start: true, end: false },
        false,
      )[0]!;
    const bytes = (t: { data: Uint8Array }) => Uint8Array.from(t.data).buffer;
    expect(new BigUint64Array(bytes(corr('TYPE_UINT64')))[0]).toBe(id);
    expect(new BigInt64Array(bytes(corr('TYPE_INT64')))[0]).toBe(BigInt.asIntN(64, id));
    expect(new Uint32Array(bytes(corr('TYPE_UINT32')))[0]).toBe(3);
    expect(new Int32Array(bytes(corr('TYPE_INT32')))[0]).toBe(3);
    const s = corr('TYPE_STRING');
    expect([s.datatype, Buffer.from(s.data.subarray(4)).toString()]).toEqual(['BYTES', id.toString()]);
  });
});

describe('withSequenceInputs', () => {
  it('adds zero state at START, the carried state after, and asks for the state output', () => {
    const spec = sequenceSpecOf(config({ state: [{ input_name: 'SI', output_name: 'SO', data_type: 'TYPE_FP32', dims: [1] }] }));
    const req = { modelName: 'm', inputs: [], outputs: [], parameters: {} };
    const carried = new Map([
      ['SO', { name: 'SO', datatype: 'FP32' as const, shape: [1, 1], data: new Uint8Array(new Float32Array([7]).buffer) }],
    ]);
    const first = withSequenceInputs(req, spec, { id: 1n, start: true, end: false }, carried, true, ['OUT']);
    expect(first.inputs.map((t) => [t.name, t.shape, [...new Float32Array(Uint8Array.from(t.data).buffer)]])).toEqual([
      ['SI', [1, 1], [0]],
    ]);
    expect(first.outputs.map((o) => o.name)).toEqual(['OUT', 'SO']);
    const next = withSequenceInputs(req, spec, { id: 1n, start: false, end: false }, carried, true, ['OUT']);
    expect([...new Float32Array(Uint8Array.from(next.inputs[0]!.data).buffer)]).toEqual([7]);
  });
});
