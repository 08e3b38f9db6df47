// A JSON call body for the small-call fast path: the native scanner reads the
// long number arrays (native scanJsonNumbers: std::from_chars into one
// Float64Array) and JSON.parse builds the rest, each such array standing as a
// marker string "\u0001<at>,<count>". JSON.parse spent most of its time on
// those numbers (64 fractions of 16-17 digits: 8-19 us in the gateway's
// profile); scan plus parse takes about half, and the numbers then go into
// the tensor from a Float64Array rather than from 64 heap numbers.
//
// The numbers live in one buffer reused by the next call: read them
// (json-inputs-fast.ts) before anything else parses a body. A body outside
// the scanner's strict subset is parsed by JSON.parse alone (`numbers`
// undefined), so its value or its error is exactly JSON.parse's.
import { scanJsonNumbers } from '../../native/index.ts';

/** Arrays of at least this many numbers are read by the scanner (shorter ones, like shapes, stay JS arrays). */
export const MIN_SCANNED = 16;
/** The reused buffer grows to this many numbers at most; a larger body gets a buffer of its own. */
const KEEP_NUMBERS = 1 << 16;

let scratch = new Float64Array(1024);

export interface ScannedBody {
  value: unknown;
  /** The scanned numbers, when markers stand for them in `value`; valid until the next parse. */
  numbers: Float64Array | undefined;
}

/** The body's JSON value; throws JSON.parse's SyntaxError on a body that is not JSON. */
export function parseScanned(raw: Uint8Array): ScannedBody {
  let into = scratch;
  let text = scanJsonNumbers(raw, MIN_SCANNED, into);
  if (typeof text === 'number') {
    into = new Float64Array(text);
    if (text <= KEEP_NUMBERS) scratch = into;
    text = scanJsonNumbers(raw, MIN_SCANNED, into);
  }
  if (typeof text === 'string') return { value: JSON.parse(text), numbers: into };
  return { value: JSON.parse(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('utf8')), numbers: undefined };
}

/** The [at, count] of a marker string, or undefined when `v` is not one. */
export function markerOf(v: unknown): [number, number] | undefined {
  if (typeof v !== 'string' || v.charCodeAt(0) !== 1) return undefined;
  const comma = v.indexOf(',');
  return [Number(v.slice(1, comma)), Number(v.slice(comma + 1))];
}
