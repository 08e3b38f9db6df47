// The request deadline helper: where the `timeout` parameter bounds the whole
// request, and that the caller is answered by it while the run goes on.
import { describe, expect, it } from 'vitest';
import { answerByDeadline, timeoutBoundsRequest } from '../../engine/server/request-deadline.ts';
import type { InferRequest, InferResponse } from '../../engine/api/infer-request.ts';
import type { ModelConfig } from '../../engine/api/model-config.ts';
import { RequestCancel } from '../../engine/api/cancel-signal.ts';
import { StatusError } from '../../engine/api/status.ts';

const config = (dynamic_batching?: ModelConfig['dynamic_batching'], max_batch_size = 8) =>
  ({ name: 'm', max_batch_size, input: [], output: [], dynamic_batching }) as unknown as ModelConfig;
const req = (timeoutUs?: number): InferRequest => ({
  modelName: 'm',
  inputs: [],
  outputs: [],
  parameters: {},
  timeoutUs,
  arrivalNs: process.hrtime.bigint(),
});
const response: InferResponse = { modelName: 'm', modelVersion: '1', outputs: [] };

describe('timeoutBoundsRequest', () => {
  it('bounds the request unless its queue level DELAYs timed-out requests and allows the override', () => {
    expect(timeoutBoundsRequest(undefined, undefined)).toBe(true);
    expect(timeoutBoundsRequest(config(), undefined)).toBe(true);
    expect(
      timeoutBoundsRequest(config({ default_queue_policy: { timeout_action: 'REJECT', allow_timeout_override: true } }), undefined),
    ).toBe(true);
    expect(
      timeoutBoundsRequest(config({ default_queue_policy: { timeout_action: 'DELAY', allow_timeout_override: true } }), undefined),
    ).toBe(false);
    expect(timeoutBoundsRequest(config({ default_queue_policy: { timeout_action: 'DELAY' } }), undefined)).toBe(true);
    // Without batching the queue policy does not apply.
    expect(
      timeoutBoundsRequest(config({ default_queue_policy: { timeout_action: 'DELAY', allow_timeout_override: true } }, 0), undefined),
    ).toBe(true);
    const levels = config({
      priority_levels: 2,
      default_priority_level: 2,
      priority_queue_policy: { '1': { timeout_action: 'DELAY', allow_timeout_override: true } },
    });
    expect(timeoutBoundsRequest(levels, 1)).toBe(false);
    expect(timeoutBoundsRequest(levels, 2)).toBe(true);
    expect(timeoutBoundsRequest(levels, 0)).toBe(true); // the default level, 2
  });
});

describe('answerByDeadline', () => {
  it('without a timeout it is the run itself', async () => {
    const r = req();
    await expect(
      answerByDeadline(
        r,
        async () => response,
        () => undefined,
      ),
    ).resolves.toBe(response);
    expect(r.signal).toBeUndefined();
  });

  it("answers UNAVAILABLE 'Request timeout expired' by the deadline, aborts the request, and drops the late outcome", async () => {
    const r = req(30_000);
    const client = new RequestCancel();
    r.signal = client;
    let finish!: (v: InferResponse) => void;
    const run = new Promise<InferResponse>((resolve) => (finish = resolve));
    const t0 = performance.now();
    const err = await answerByDeadline(
      r,
      () => run,
      () => undefined,
    ).catch((e: unknown) => e);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(25);
    expect(err).toBeInstanceOf(StatusError);
    expect((err as StatusError).code).toBe('UNAVAILABLE');
    expect((err as StatusError).message).toBe('Request timeout expired');
    expect(r.signal!.aborted).toBe(true); // schedulers drop it from their queues
    expect(client.aborted).toBe(false); // the client's own signal is not ours to fire
    finish(response); // late: nobody hears it, nothing throws
  });

  it("the client's cancellation reaches the request's new signal", async () => {
    const r = req(60_000_000);
    const client = new RequestCancel();
    r.signal = client;
    const p = answerByDeadline(
      r,
      () => new Promise<InferResponse>((_, reject) => r.signal!.addEventListener('abort', () => reject(new Error('gone')))),
      () => undefined,
    );
    client.abort();
    await expect(p).rejects.toThrow('gone');
  });
});
