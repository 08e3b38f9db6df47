// Inbound third-party webhooks that call a function: verify the signature
// (see signature.ts for the scheme) and map fields of the JSON event to the
// function's inputs. A mapping is `input name -> $.path.to.field` (dot
// segments; a numeric segment indexes an array). Binary inputs (UINT8 or
// BYTES) take a string field as base64; other inputs take the value as is.
import { verifyInbound, type InboundVerdict } from './signature.ts';

export interface InboundSettings {
  secretEnv: string;
  signatureHeader: string;
  timestampHeader: string;
  toleranceS: number;
  inputs: Record<string, string>;
}

/** Read `$.a.b.0.c` from a JSON value; undefined when any step is missing. */
export function readPath(event: unknown, path: string): unknown {
  if (!path.startsWith('$')) return undefined;
  let cur: unknown = event;
  for (const seg of path.slice(1).split('.').slice(1)) {
    if (cur === null || typeof cur !== 'object') return undefined;
    if (Array.isArray(cur)) {
      if (!/^\d+$/.test(seg)) return undefined;
      cur = cur[Number(seg)];
    } else {
      if (!Object.prototype.hasOwnProperty.call(cur, seg)) return undefined;
      cur = (cur as Record<string, unknown>)[seg];
    }
  }
  return cur;
}

const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

/**
 * The JSON call body `{"inputs": {...}}` for an event. `datatypeOf` gives an
 * input's datatype. Throws an Error naming the input and path at fault.
 */
export function mapEventToInputs(
  event: unknown,
  mapping: Record<string, string>,
  datatypeOf: (input: string) => string | undefined,
): { inputs: Record<string, unknown> } {
  const inputs: Record<string, unknown> = {};
  for (const [input, path] of Object.entries(mapping)) {
    const v = readPath(event, path);
    if (v === undefined) throw new Error(`event field '${path}' (input '${input}') is missing`);
    const dt = datatypeOf(input);
    if (dt === undefined) throw new Error(`the function has no input '${input}'`);
    if ((dt === 'UINT8' || dt === 'BYTES') && typeof v === 'string') {
      const s = v.replace(/\s+/g, '');
      if (!BASE64.test(s)) throw new Error(`event field '${path}' (input '${input}') is not base64`);
      inputs[input] = { b64: s };
    } else {
      inputs[input] = v;
    }
  }
  return { inputs };
}

/** Verify an inbound request's headers and raw body against the settings; null when it verifies. */
export function checkInbound(
  s: InboundSettings,
  secret: string,
  header: (name: string) => string | undefined,
  body: Uint8Array,
  nowMs = Date.now(),
): InboundVerdict {
  return verifyInbound(secret, body, header(s.signatureHeader), header(s.timestampHeader), s.toleranceS, nowMs);
}
