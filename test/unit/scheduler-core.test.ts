// The bookkeeping the three schedulers share (engine/scheduling/scheduler-core.ts),
// on a fake clock: in-flight count, stop-and-drain, settle-and-answer, and
// the one-shot timer. No sleeping.
import { describe, expect, it } from 'vitest';
import { OneShotTimer, SchedulerCore } from '../../engine/scheduling/scheduler-core.ts';
import type { InferResponse } from '../../engine/api/infer-request.ts';
import { StatusError, invalidArg } from '../../engine/api/status.ts';
import { FakeClock, flush } from '../fixtures/fake-scheduling.ts';

function setup() {
  const clock = new FakeClock();
  const stats = {
    ok: [] as number[],
    bad: [] as number[],
    succeeded(ns: number) {
      this.ok.push(ns);
    },
    failed(ns: number) {
      this.bad.push(ns);
    },
  };
  const core = new SchedulerCore({ refusal: "model 'm' is not accepting requests", stats, clock });
  return { clock, stats, core };
}
const response: InferResponse = { modelName: 'm', modelVersion: '1', outputs: [] };

describe('SchedulerCore', () => {
  it('counts accepted requests until settled and records each in the statistics from its arrival', async () => {
    const t = setup();
    const arrival = t.clock.nowNs();
    t.core.accept();
    t.core.accept();
    expect(t.core.inflight).toBe(2);
    t.clock.now += 250n;
    const answers: unknown[] = [];
    t.core.settle(
      arrival,
      response,
      (r) => answers.push(r),
      (e) => answers.push(e),
    );
    t.clock.now += 50n;
    t.core.settle(
      arrival,
      invalidArg('bad'),
      (r) => answers.push(r),
      (e) => answers.push(e),
    );
    expect(t.core.inflight).toBe(0);
    expect(t.stats.ok).toEqual([250]);
    expect(t.stats.bad).toEqual([300]);
    expect(answers[0]).toBe(response);
    expect((answers[1] as StatusError).code).toBe('INVALID_ARG');
  });

  it('stop() refuses new requests UNAVAILABLE and resolves only when the last one is answered', async () => {
    const t = setup();
    expect(t.core.refused()).toBeUndefined();
    t.core.accept();
    t.core.accept();
    let drained = false;
    void t.core.stop().then(() => (drained = true));
    const again = t.core.stop(); // a second stop waits for the same drain
    expect(t.core.stopping).toBe(true);
    const refused = t.core.refused()!;
    expect(refused.code).toBe('UNAVAILABLE');
    expect(refused.message).toBe("model 'm' is not accepting requests");
    t.core.done();
    await flush();
    expect(drained).toBe(false);
    t.core.done();
    await again;
    expect(drained).toBe(true);
  });

  it('stop() with nothing in flight resolves at once', async () => {
    await expect(setup().core.stop()).resolves.toBeUndefined();
  });
});

describe('OneShotTimer', () => {
  it('fires once at the armed time; arming again replaces the wake-up', async () => {
    const clock = new FakeClock();
    const fired: bigint[] = [];
    const timer = new OneShotTimer(clock, () => fired.push(clock.nowNs()));
    const t0 = clock.nowNs();
    timer.armAt(t0 + 100n, t0);
    timer.armAt(t0 + 100n, t0); // same time: kept, not doubled
    expect(timer.at).toBe(t0 + 100n);
    timer.armAt(t0 + 40n, t0); // replaced
    await clock.advance(200n);
    expect(fired).toEqual([t0 + 40n]);
    expect(timer.at).toBeUndefined();
  });

  it('armBy keeps an earlier wake-up and moves a later one forward; cancel and undefined disarm', async () => {
    const clock = new FakeClock();
    let fires = 0;
    const timer = new OneShotTimer(clock, () => fires++);
    const t0 = clock.nowNs();
    timer.armBy(t0 + 50n, t0);
    timer.armBy(t0 + 80n, t0);
    expect(timer.at).toBe(t0 + 50n);
    timer.armBy(t0 + 10n, t0);
    expect(timer.at).toBe(t0 + 10n);
    timer.cancel();
    await clock.advance(100n);
    expect(fires).toBe(0);
    timer.armAt(clock.nowNs() - 5n, clock.nowNs()); // already due: fires on the next turn
    await clock.advance(0n);
    expect(fires).toBe(1);
    timer.armAt(clock.nowNs() + 5n, clock.nowNs());
    timer.armAt(undefined, clock.nowNs());
    await clock.advance(10n);
    expect(fires).toBe(1);
  });
});
