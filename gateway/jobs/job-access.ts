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
import { createHmac, timingSafeEqual } from 'node:crypto';
import { keyAccepted } from '../calls/api-key.ts';
import { gatewayError } from '../core/errors.ts';
import type { FunctionDefinition } from '../calls/function-schema.ts';
import type { JobRecord } from './job-state.ts';

// Importers keep reading the id helpers from job-access.ts.
export { isJobId, newJobId } from './job-id.ts';

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
export function checkJobAccess(
  rec: Pick<JobRecord, 'id' | 'keyHash'>,
  key: string | undefined,
  def: FunctionDefinition | undefined,
  env = process.env,
): void {
  if (!rec.keyHash && !def?.auth) return;
  if (!key) throw gatewayError('JOB_KEY_MISSING', { id: rec.id });
  const matches = rec.keyHash ? sameHash(jobKeyHash(rec.id, key), rec.keyHash) : true;
  const accepted = def ? keyAccepted(def, key, env) : true;
  if (!matches || !accepted) throw gatewayError('JOB_KEY_INVALID', { id: rec.id });
}
