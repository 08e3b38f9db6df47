// API-key checks for functions that declare `auth.apiKeyEnv`: the accepted
// keys come from environment variables (each may hold several, comma-separated),
// read at call time so a rotated key applies without a restart. Keys are
// compared by SHA-256 digest with timingSafeEqual (no early exit on a prefix).
import { createHash, hash, timingSafeEqual } from 'node:crypto';
import { gatewayError } from '../core/errors.ts';
import type { FunctionDefinition } from './function-schema.ts';

// crypto.hash (one-shot, Node >= 20.12) skips creating a Hash object per call.
const oneShot = typeof hash === 'function';
function digest(s: string): Buffer {
  return oneShot ? hash('sha256', s, 'buffer') : createHash('sha256').update(s).digest();
}

// Digests of the accepted keys, per variable, recomputed when its value changes (rotation).
const acceptedCache = new Map<string, { value: string; digests: Buffer[] }>();
function acceptedDigests(name: string, value: string): Buffer[] {
  const hit = acceptedCache.get(name);
  if (hit && hit.value === value) return hit.digests;
  const digests = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map(digest);
  acceptedCache.set(name, { value, digests });
  return digests;
}

// Digests of presented keys that were accepted, by the key, so a client's key is hashed once, not per call
// (SHA-256 was 3 % of a small call's CPU). Only accepted keys are kept (each is in the environment already, in
// clear), at most 256; every call still compares against the digests accepted now, so a rotated-out key fails.
const ACCEPTED_KEYS_MAX = 256;
const acceptedKeys = new Map<string, Buffer>();

/** The key a request presents: `X-API-Key`, or `Authorization: Bearer <key>`. */
export function presentedKey(header: (name: string) => string | undefined): string | undefined {
  const k = header('x-api-key');
  if (k) return k;
  const auth = header('authorization');
  const m = auth ? /^Bearer\s+(.+)$/i.exec(auth) : null;
  return m ? m[1]!.trim() : undefined;
}

/** True when `key` is one of the keys `def.auth` accepts now (true for a function without auth). */
export function keyAccepted(def: FunctionDefinition, key: string, env = process.env): boolean {
  if (!def.auth) return true;
  const d = acceptedKeys.get(key) ?? digest(key);
  let ok = false;
  for (const v of def.auth.apiKeyEnv) {
    for (const accepted of acceptedDigests(v, env[v] ?? '')) {
      if (timingSafeEqual(d, accepted)) ok = true; // no early exit
    }
  }
  if (ok && !acceptedKeys.has(key)) {
    if (acceptedKeys.size >= ACCEPTED_KEYS_MAX) acceptedKeys.clear();
    acceptedKeys.set(key, d);
  }
  return ok;
}

/** Throws API_KEY_MISSING (401) / API_KEY_INVALID (403) unless the call may proceed. */
export function checkApiKey(def: FunctionDefinition, header: (name: string) => string | undefined, env = process.env): void {
  if (!def.auth) return;
  const key = presentedKey(header);
  if (!key) throw gatewayError('API_KEY_MISSING', { name: def.name });
  if (!keyAccepted(def, key, env)) throw gatewayError('API_KEY_INVALID', { name: def.name });
}
