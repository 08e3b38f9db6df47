// The one output selection (gateway/calls/output-select.ts) every way a call
// comes in goes through: Hono route, direct route, streaming and stored calls.
import { describe, expect, it } from 'vitest';
import { GatewayError } from '../../gateway/core/errors.ts';
import type { ResolvedFunction, TensorSpec } from '../../gateway/calls/function-registry.ts';
import { binaryOutput, selectOutputs } from '../../gateway/calls/output-select.ts';

const spec = (name: string, tensor: string): TensorSpec => ({ name, tensor, datatype: 'FP32', shape: [-1] });
const fn = { name: 'f', outputs: [spec('a', 'A'), spec('b', 'B'), spec('c', 'C')] } as unknown as ResolvedFunction;

function codeOf(f: () => unknown): string | undefined {
  try {
    f();
  } catch (e) {
    return e instanceof GatewayError ? e.code : `not a catalog error: ${String(e)}`;
  }
  return undefined;
}

describe('output selection', () => {
  it('with neither a query nor a list: every output, in the function order', () => {
    expect(selectOutputs(fn, undefined, undefined).map((s) => s.tensor)).toEqual(['A', 'B', 'C']);
    expect(selectOutputs(fn, '', undefined).map((s) => s.tensor)).toEqual(['A', 'B', 'C']);
  });

  it("the body's list: those outputs, in the list's order, repeats kept", () => {
    expect(selectOutputs(fn, undefined, ['c', 'a']).map((s) => s.tensor)).toEqual(['C', 'A']);
    expect(selectOutputs(fn, undefined, ['b', 'b']).map((s) => s.tensor)).toEqual(['B', 'B']);
    expect(selectOutputs(fn, undefined, [])).toEqual([]);
  });

  it('?output=NAME wins over the list', () => {
    expect(selectOutputs(fn, 'b', ['a', 'c']).map((s) => s.tensor)).toEqual(['B']);
  });

  it('an unknown name, from either source, is OUTPUT_UNKNOWN (by public name, not tensor name)', () => {
    expect(codeOf(() => selectOutputs(fn, 'zz', undefined))).toBe('OUTPUT_UNKNOWN');
    expect(codeOf(() => selectOutputs(fn, undefined, ['a', 'zz']))).toBe('OUTPUT_UNKNOWN');
    expect(codeOf(() => selectOutputs(fn, undefined, ['A']))).toBe('OUTPUT_UNKNOWN');
  });

  it('a binary reply carries exactly one output; without the Accept it is not binary', () => {
    const one = selectOutputs(fn, 'c', undefined);
    expect(binaryOutput(fn, one, 'application/octet-stream')?.tensor).toBe('C');
    expect(binaryOutput(fn, one, 'application/json, application/octet-stream;q=0.5')?.tensor).toBe('C');
    expect(binaryOutput(fn, one, 'application/json')).toBeUndefined();
    expect(binaryOutput(fn, fn.outputs, undefined)).toBeUndefined();
    expect(codeOf(() => binaryOutput(fn, fn.outputs, 'application/octet-stream'))).toBe('OUTPUT_NOT_ACCEPTABLE');
    expect(codeOf(() => binaryOutput(fn, [], 'application/octet-stream'))).toBe('OUTPUT_NOT_ACCEPTABLE');
  });
});
