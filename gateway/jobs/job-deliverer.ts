// The job runner's `deliver`: signs and POSTs a job's result to its callback
// with the job's delivery settings, reading the HMAC key from the environment
// at delivery time (the function's async.secretEnv, else
// GATEWAY_WEBHOOK_SECRET) so keys are never stored with jobs.
import type { DeliveryOutcome } from '../webhooks/delivery.ts';
import type { JobRecord } from './job-state.ts';
import { deliverWebhook } from '../webhooks/delivery.ts';

export function jobDeliverer(env: NodeJS.ProcessEnv = process.env) {
  return async (job: JobRecord, body: unknown, onAttempt: (attempts: number, error: string) => Promise<void>): Promise<DeliveryOutcome> => {
    const cb = job.callback!;
    const secret = (cb.secretEnv ? env[cb.secretEnv] : undefined) || env.GATEWAY_WEBHOOK_SECRET;
    if (!secret) return { delivered: false, attempts: job.attempts, lastError: 'no signing secret is configured' };
    return deliverWebhook({
      url: cb.url,
      jobId: job.id,
      body: JSON.stringify(body),
      secret,
      headers: { 'X-Job-Status': (job.status ?? 500) < 400 ? 'succeeded' : 'failed' },
      maxAttempts: cb.maxAttempts,
      backoffMs: cb.backoffMs,
      maxBackoffMs: cb.maxBackoffMs,
      attemptTimeoutMs: cb.attemptTimeoutMs,
      attemptsSoFar: job.attempts,
      onAttempt,
    });
  };
}
