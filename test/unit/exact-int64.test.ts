// InferParameter's int64/uint64 past 2^53 round-trip exactly through the
// protocol's protobufjs types (protocol/exact-int64.ts); safe values stay numbers.
import { describe, expect, it } from 'vitest';
import { messageType } from '../../protocol/index.ts';

const T = messageType('inference.ModelInferRequest');
type Decoded = { parameters: Record<string, { uint64_param?: unknown; int64_param?: unknown; parameter_choice?: string }> };
const roundTrip = (parameters: Record<string, object>) =>
  (T.decode(T.encode({ model_name: 'm', parameters } as never).finish()) as unknown as Decoded).parameters;

describe('exact int64 parameters', () => {
  it('decodes values past 2^53 as exact bigints, both signs and the uint64 top', () => {
    const p = roundTrip({
      top: { uint64_param: 2n ** 64n - 1n },
      a: { uint64_param: 2n ** 60n + 1n },
      neg: { int64_param: -(2n ** 62n) - 3n },
      small: { int64_param: 5 },
      u: { uint64_param: 7 },
    });
    expect(p.top!.uint64_param).toBe(2n ** 64n - 1n);
    expect(p.a!.uint64_param).toBe(2n ** 60n + 1n);
    expect(p.neg!.int64_param).toBe(-(2n ** 62n) - 3n);
    expect(p.top!.parameter_choice).toBe('uint64_param');
    expect([p.small!.int64_param, p.u!.uint64_param]).toEqual([5, 7]);
  });

  it('a number past 2^53 on the wire (another client) still decodes exactly', () => {
    // 2^53 + 1 written by protobufjs from {low, high}, as a Long-based client would.
    const bytes = T.encode({ model_name: 'm', parameters: { x: { uint64_param: { low: 1, high: 0x200000 } } } } as never).finish();
    const d = T.decode(bytes) as unknown as Decoded;
    expect(d.parameters.x!.uint64_param).toBe(2n ** 53n + 1n);
  });
});
