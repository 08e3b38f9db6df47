import { describe, expect, it } from 'vitest';
import {
  decodeValues,
  deserializeBytes,
  encodeValues,
  isDatatype,
  serializeBytes,
  TensorValueError,
  typedView,
} from '../../protocol/tensor-codec.ts';

const thrown = (f: () => unknown): Error => {
  try {
    f();
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected a throw');
};

describe('tensor codec', () => {
  it('copies an unaligned Buffer instead of viewing it', () => {
    const backing = Buffer.alloc(13);
    const b = backing.subarray(1);
    b.writeFloatLE(1.5, 0);
    b.writeFloatLE(-3, 4);
    const v = typedView('FP32', b) as Float32Array;
    expect(v.byteOffset % 4).toBe(0);
    expect([...v]).toEqual([1.5, -3, 0]);
    expect(decodeValues('FP32', b)).toEqual([1.5, -3, 0]);
  });

  it('checks integer range at the edges of each type, naming the element', () => {
    expect([...encodeValues('INT8', [-128, 127])]).toEqual([128, 127]);
    const e = thrown(() => encodeValues('INT8', [0, 128]));
    expect(e).toBeInstanceOf(TensorValueError);
    expect((e as TensorValueError).index).toBe(1);
    expect(e.message).toBe('element 1 (128) is out of range for INT8');
    expect(thrown(() => encodeValues('UINT16', [-1])).message).toMatch(/out of range for UINT16/);
    expect(thrown(() => encodeValues('INT64', [2 ** 63])).message).toMatch(/out of range for INT64/);
    expect(decodeValues('INT64', encodeValues('INT64', [-(2 ** 53)]))).toEqual([-(2 ** 53)]);
    expect(thrown(() => encodeValues('FP32', [NaN])).message).toBe('element 0 must be a number');
  });

  it('takes 0/1 as BOOL only when asked', () => {
    expect(thrown(() => encodeValues('BOOL', [true, 1])).message).toBe('element 1 must be a boolean');
    expect([...encodeValues('BOOL', [true, 0, 1], { boolFromNumbers: true })]).toEqual([1, 0, 1]);
  });

  it('frames BYTES and names the tensor when the framing is broken', () => {
    const s = serializeBytes(['hé', new Uint8Array([0, 255]), '']);
    expect(deserializeBytes(s).map((b) => [...b])).toEqual([[104, 195, 169], [0, 255], []]);
    expect(decodeValues('BYTES', serializeBytes(['x', 'ü']))).toEqual(['x', 'ü']);
    expect(thrown(() => deserializeBytes(s.subarray(0, 6), 'IN')).message).toBe("BYTES element length 3 overruns the data of 'IN'");
    expect(thrown(() => decodeValues('BYTES', s.subarray(0, 2), 'IN')).message).toBe("unexpected end of BYTES data for 'IN'");
  });

  it('knows only the KServe datatypes', () => {
    expect(isDatatype('BF16')).toBe(true);
    expect(isDatatype('toString')).toBe(false);
    expect(thrown(() => encodeValues('COMPLEX', [1])).message).toBe("unsupported datatype 'COMPLEX'");
  });
});
