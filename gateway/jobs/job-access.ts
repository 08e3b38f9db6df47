// Who may read an async job (GET /jobs/<id>): whoever may call its function.
//
// - Job ids carry 144 random bits, so an id cannot be guessed; for a
//   function without `auth` the id alone is the capability to read the job.
// - A call made with an API key leaves an HMAC of that key with the job
//   (keyed by the job id: equal keys give different values per job, and
//   neither memory nor Redis ever holds the key). A reader must present the
//   same key, compared in constant time; while the function still declares
//   `auth` the key must also still be accepted (a revoked key reads nothing).
// - A job without a key hash whose function declares `auth` now (an inbound
//   webhook's job, or `auth` added by a deploy since) needs a key the
//   function accepts now.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { keyAccepted } from '../api-key.ts';
import { gatewayError } from '../errors.ts';
import type { FunctionDefinition } from '../function-schema.ts';
import type { JobRecord } from './job-state.ts';

/** A fresh job id: 18 random bytes as base64url (24 characters, 144 bits). */
export function newJobId(): string {
  return randomBytes(18).toString('base64url');
}

/** Ids this gateway issues (and the UUIDs it issued before); anything else is not a job. */
const JOB_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** True when `id` has the shape of a job id (checked before any store is asked). */
export function isJobId(id: string): boolean {
  return JOB_ID.test(id);
}

/** The credential hash kept with a job: HMAC-SHA256 of the API key, keyed by the job id (base64url). */
export function jobKeyHash(jobId: string, apiKey: string): string {
  return createHmac('sha256', `tgw-job:${jobId}`).update(apiKey).digest('base64url');
}

function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a, 'base64url');
  const y = Buffer.from(b, 'base64url');
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * Throws JOB_KEY_MISSING (401) / JOB_KEY_INVALID (403) unless `key` may read
 * `rec`. `def` is the job's function as defined now (undefined: no longer
 * defined, or an ensemble without a definition).
 */
export function checkJobAccess(rec: Pick<JobRecord, 'id' | 'keyHash'>, key: string | undefined, def: FunctionDefinition | undefined, env = process.env): void {
  if (!rec.keyHash && !def?.auth) return;
  if (!key) throw gatewayError('JOB_KEY_MISSING', { id: rec.id });
  const matches = rec.keyHash ? sameHash(jobKeyHash(rec.id, key), rec.keyHash) : true;
  const accepted = def ? keyAccepted(def, key, env) : true;
  if (!matches || !accepted) throw gatewayError('JOB_KEY_INVALID', { id: rec.id });
}
