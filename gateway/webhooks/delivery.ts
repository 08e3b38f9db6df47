// Delivery of one job's result to its callback URL: POST the exact JSON body
// with `X-Job-Id` and `X-Signature-256: sha256=<hex HMAC-SHA256 of the body>`.
// A 2xx answer delivers; anything else (other status, redirect, network
// error, per-attempt timeout) is a failed attempt, retried after a full-jitter
// exponential backoff (delay = random() * min(max, base * 2^(n-1))) until
// the attempt limit, then the delivery is dead with the last error.
// Redirects are not followed (they could lead off the allowlist).
import { signBody } from './signature.ts';

/** What `deliver` reports: delivered, or dead with the last error. */
export type DeliveryOutcome = { delivered: true; attempts: number } | { delivered: false; attempts: number; lastError: string };

/** Full-jitter backoff before attempt n+1, after n failed attempts (pure; random injected). */
export function backoffDelay(failedAttempts: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.max(0, failedAttempts - 1));
  return Math.floor(random() * ceiling);
}

export interface DeliveryRequest {
  url: string;
  jobId: string;
  /** The exact body bytes to send (already serialized JSON). */
  body: string;
  secret: string;
  /** Extra headers (e.g. X-Job-Status). */
  headers?: Record<string, string>;
  maxAttempts: number;
  backoffMs: number;
  maxBackoffMs: number;
  attemptTimeoutMs: number;
  /** Attempts already made (a delivery resumed after a restart). */
  attemptsSoFar?: number;
  /** Called after each failed attempt with the attempt count and its error. */
  onAttempt?: (attempts: number, error: string) => Promise<void> | void;
  /** Injected for tests. */
  random?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

/** One POST; resolves null on a 2xx, else the error text. */
export async function attemptDelivery(r: DeliveryRequest): Promise<string | null> {
  try {
    const res = await fetch(r.url, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        'Content-Type': 'application/json',
        'User-Agent': 'tritonish-gateway',
        'X-Job-Id': r.jobId,
        'X-Signature-256': signBody(r.secret, r.body),
        ...r.headers,
      },
      body: r.body,
      signal: AbortSignal.timeout(r.attemptTimeoutMs),
    });
    await res.arrayBuffer().catch(() => undefined); // only drains the socket: the status decides the delivery
    if (res.status >= 200 && res.status < 300) return null;
    return `HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ''}`;
  } catch (e) {
    const err = e as Error & { cause?: { code?: string; message?: string } };
    if (err.name === 'TimeoutError') return `no answer within ${r.attemptTimeoutMs} ms`;
    return err.cause?.code ?? err.cause?.message ?? err.message;
  }
}

const defaultSleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Deliver with retries; resolves delivered, or dead with the last error. */
export async function deliverWebhook(r: DeliveryRequest): Promise<DeliveryOutcome> {
  const sleep = r.sleep ?? defaultSleep;
  let attempts = r.attemptsSoFar ?? 0;
  let lastError = 'no attempt made';
  while (attempts < r.maxAttempts) {
    if (attempts > 0) await sleep(backoffDelay(attempts, r.backoffMs, r.maxBackoffMs, r.random));
    const err = await attemptDelivery(r);
    attempts++;
    if (err === null) return { delivered: true, attempts };
    lastError = err;
    await r.onAttempt?.(attempts, err);
  }
  return { delivered: false, attempts, lastError };
}
