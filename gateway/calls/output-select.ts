// Which outputs a call gets, decided in one place for every way a call comes
// in (the Hono route, the direct route, streaming calls, stored async calls):
// `?output=NAME` wins over the body's `outputs` list; with neither, all the
// function's outputs in its own order. A binary reply (`Accept:
// application/octet-stream`) carries exactly one output.
import { gatewayError } from '../core/errors.ts';
import type { ResolvedFunction, TensorSpec } from './function-registry.ts';

/** The specs of the outputs named by `query` (one name) or else `wanted`; all outputs when neither names any. Throws OUTPUT_UNKNOWN. */
export function selectOutputs(fn: ResolvedFunction, query: string | undefined, wanted: string[] | undefined): TensorSpec[] {
  const names = query ? [query] : wanted;
  if (!names) return fn.outputs;
  return names.map((n) => {
    const s = fn.outputs.find((o) => o.name === n);
    if (!s) throw gatewayError('OUTPUT_UNKNOWN', { name: fn.name, output: n });
    return s;
  });
}

/** The one output a binary reply carries when `accept` asks for one (undefined otherwise). Throws OUTPUT_NOT_ACCEPTABLE unless exactly one was selected. */
export function binaryOutput(fn: ResolvedFunction, specs: TensorSpec[], accept: string | undefined): TensorSpec | undefined {
  if (!(accept ?? '').includes('application/octet-stream')) return undefined;
  if (specs.length !== 1) throw gatewayError('OUTPUT_NOT_ACCEPTABLE', { name: fn.name, count: specs.length });
  return specs[0];
}
