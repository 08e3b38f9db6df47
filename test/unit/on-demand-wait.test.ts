// A call waiting for an on-demand load is not failed sooner than its own
// timeout allows: the wait is the longer of --on-demand-load-timeout-secs and
// the request's `timeout` parameter.
import { describe, expect, it } from 'vitest';
import { readyOnDemand } from '../../engine/sharing/on-demand-loading.ts';
import type { ModelVersion } from '../../engine/api/model-version.ts';
import type { InferRequest } from '../../engine/api/infer-request.ts';

function repo() {
  const waits: number[] = [];
  let ready = false;
  const mv = { stats: { queueWait: () => {} } } as unknown as ModelVersion;
  return {
    waits,
    r: {
      readyVersion: () => (ready ? mv : undefined),
      ensureLoaded: async (_n: string, timeoutMs: number) => {
        waits.push(timeoutMs);
        ready = true;
      },
      get: () => mv,
    },
  };
}

const req = (timeoutUs?: number): InferRequest => ({ modelName: 'm', inputs: [], outputs: [], parameters: {}, timeoutUs });

describe('on-demand wait', () => {
  it('waits the engine default when the call names no longer timeout', async () => {
    const a = repo();
    await readyOnDemand(a.r, req(), 30_000);
    const b = repo();
    await readyOnDemand(b.r, req(5_000_000), 30_000);
    expect([...a.waits, ...b.waits]).toEqual([30_000, 30_000]);
  });

  it("waits as long as the call's own timeout when that is longer", async () => {
    const { r, waits } = repo();
    await readyOnDemand(r, req(90_000_000), 30_000);
    expect(waits).toEqual([90_000]);
  });
});
