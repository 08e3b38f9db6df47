// HMAC-SHA256 signatures of webhook bodies, both directions.
//
// Outbound (job callbacks): `X-Signature-256: sha256=<hex>` where hex is
// HMAC-SHA256(secret, exact body bytes), as GitHub signs its webhooks.
//
// Inbound (third-party webhooks calling a function): the sender puts the Unix
// time in seconds in the timestamp header (default `X-Timestamp`) and
// `sha256=<hex HMAC-SHA256(secret, "<timestamp>.<exact body bytes>")>` in the
// signature header (default `X-Signature-256`). Signing the timestamp with
// the body lets the receiver refuse replays outside a tolerance window.
// Comparisons are constant-time (crypto.timingSafeEqual on equal-length digests).
import { createHmac, timingSafeEqual } from 'node:crypto';

export const SIGNATURE_PREFIX = 'sha256=';

/** `sha256=<hex>` of the body under the secret. */
export function signBody(secret: string, body: string | Uint8Array): string {
  return SIGNATURE_PREFIX + createHmac('sha256', secret).update(body).digest('hex');
}

/** `sha256=<hex>` of "<timestamp>.<body>" (the inbound scheme). */
export function signTimestamped(secret: string, timestamp: string, body: string | Uint8Array): string {
  return SIGNATURE_PREFIX + createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest('hex');
}

/** Constant-time check of a presented `sha256=<hex>` against the expected one. */
export function signatureMatches(expected: string, presented: string | undefined): boolean {
  if (!presented) return false;
  const p = presented.trim();
  if (!p.toLowerCase().startsWith(SIGNATURE_PREFIX)) return false;
  const a = Buffer.from(expected.slice(SIGNATURE_PREFIX.length), 'hex');
  const hex = p.slice(SIGNATURE_PREFIX.length);
  if (!/^[0-9a-fA-F]*$/.test(hex)) return false;
  const b = Buffer.from(hex, 'hex');
  if (a.length !== b.length) return false; // the length of a SHA-256 digest is public
  return timingSafeEqual(a, b);
}

/** Why an inbound signature was refused, or null when it verifies. */
export type InboundVerdict = null | 'missing-signature' | 'missing-timestamp' | 'stale-timestamp' | 'bad-signature';

/** Verify an inbound webhook: signature over "<timestamp>.<body>", timestamp within toleranceS of now. */
export function verifyInbound(
  secret: string,
  body: Uint8Array | string,
  signature: string | undefined,
  timestamp: string | undefined,
  toleranceS: number,
  nowMs = Date.now(),
): InboundVerdict {
  if (!signature) return 'missing-signature';
  if (!timestamp) return 'missing-timestamp';
  if (!/^\d{1,12}$/.test(timestamp.trim())) return 'stale-timestamp';
  const ts = Number(timestamp.trim());
  if (Math.abs(nowMs / 1000 - ts) > toleranceS) return 'stale-timestamp';
  return signatureMatches(signTimestamped(secret, timestamp.trim(), body), signature) ? null : 'bad-signature';
}
