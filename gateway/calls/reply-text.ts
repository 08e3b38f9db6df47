// The JSON text of a call's reply: exactly JSON.stringify(replyJson(fn,
// outputs)), with FP32/FP64 values formatted by the native addon
// (numbersJson: the same digits as JSON.stringify in about half the time; a
// reply of 100 scores spent 25-30 us formatting them, a tenth of the small
// call's gateway CPU). Rows replies, and names whose place or meaning in a JS
// object differs from their order here (integer-like keys sort first,
// __proto__ is not an own key, a repeated name keeps one entry), go through
// JSON.stringify as before. unit/reply-text compares the two on every shape.
import { numbersJson } from '../../native/index.ts';
import type { ResolvedFunction } from './function-registry.ts';
import type { OutputTensor } from './payload-codec.ts';
import { hasRowFields, replyJson } from './reply-rows.ts';
import { decodeValues, typedView } from './tensor-data.ts';

/** A name JSON.stringify writes in insertion order as an own key: not integer-like, not __proto__. */
const PLAIN_NAME = /^[A-Za-z_$][^]*$/;

function plainNames(outputs: OutputTensor[]): boolean {
  for (let i = 0; i < outputs.length; i++) {
    const n = outputs[i]!.spec.name;
    if (!PLAIN_NAME.test(n) || n === '__proto__') return false;
    for (let j = 0; j < i; j++) if (outputs[j]!.spec.name === n) return false;
  }
  return true;
}

/** The `data` array's text, as JSON.stringify(decodeValues(...)) writes it. */
function dataText(t: OutputTensor): string {
  if (t.datatype === 'FP32' || t.datatype === 'FP64') return numbersJson(typedView(t.datatype, t.bytes) as Float32Array | Float64Array);
  return JSON.stringify(decodeValues(t.datatype, t.bytes));
}

/** JSON.stringify(replyJson(fn, outputs)), written with the float formatter where it can be. */
export function replyJsonText(fn: ResolvedFunction, outputs: OutputTensor[]): string {
  const rows = fn.definition.rows;
  if ((rows && hasRowFields(rows, outputs)) || !plainNames(outputs)) return JSON.stringify(replyJson(fn, outputs));
  let s = '{"outputs":{';
  for (let i = 0; i < outputs.length; i++) {
    const t = outputs[i]!;
    s += `${i ? ',' : ''}${JSON.stringify(t.spec.name)}:{"shape":${JSON.stringify(t.shape)},"datatype":${JSON.stringify(t.datatype)},"data":${dataText(t)}}`;
  }
  return `${s}}}`;
}
