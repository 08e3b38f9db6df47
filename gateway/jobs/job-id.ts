// Job ids: 144 random bits, so an id cannot be guessed (see job-access.ts for
// what an id grants). Apart from job-access.ts so job-state.ts can mint ids
// without importing the access checks that read its records.
import { randomBytes } from 'node:crypto';

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
