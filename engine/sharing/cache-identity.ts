// What a cached answer depends on besides the request: the identity of the
// loaded version (repository/version-fingerprint.ts: its files and config),
// and for an ensemble also the identities of the versions its steps run on
// now. A version without a fingerprint (taken only when the engine has a
// cache; or unreadable files) gets one that is unique to this load in this
// process: never stale, never shared.
import { createHash, randomUUID } from 'node:crypto';
import type { ModelConfig } from '../api/model-config.ts';

/** The part of a loaded model version the cache reads. */
export interface IdentifiedVersion {
  readonly name: string;
  readonly version: number;
  readonly config: ModelConfig;
  /** Fingerprint of its files and config, when taken at load. */
  readonly identity?: string;
}

export type VersionLookup = (name: string, version: number) => IdentifiedVersion | undefined;

const BOOT = randomUUID();
let loads = 0;
const unique = new WeakMap<IdentifiedVersion, string>();

/** The identity of `v` (and of its steps' versions when it is an ensemble). */
export function cacheIdentity(v: IdentifiedVersion, lookup: VersionLookup, depth = 0): string {
  const own = v.identity ?? uniqueIdentity(v);
  const steps = v.config.platform === 'ensemble' ? (v.config.ensemble_scheduling?.step ?? []) : [];
  if (!steps.length) return own;
  const h = createHash('sha256').update(own);
  for (const s of steps) {
    const sv = depth < 8 ? lookup(s.model_name, s.model_version) : undefined;
    // A step that is not loaded now fails the request anyway; nested too deep cannot be loaded.
    h.update(`|${s.model_name}:${sv ? cacheIdentity(sv, lookup, depth + 1) : 'absent'}`);
  }
  return h.digest('hex');
}

function uniqueIdentity(v: IdentifiedVersion): string {
  let id = unique.get(v);
  if (!id) unique.set(v, (id = `${BOOT}:${++loads}`));
  return id;
}
