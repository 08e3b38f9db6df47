import { describe, expect, it } from 'vitest';
import {
  decideInstances,
  DEFAULT_INSTANCE_POLICY,
  type InstanceWindow,
  type Streak,
} from '../../engine/sharing/instance-count-decision.ts';

const policy = { ...DEFAULT_INSTANCE_POLICY, cores: 4, freeBytes: Infinity, idleCores: 4 };
const hot = (name: string, extra: Partial<InstanceWindow> = {}): InstanceWindow => ({
  name,
  instances: 1,
  min: 1,
  max: 3,
  requests: 100,
  meanQueueNs: 10_000_000,
  busyFraction: 1,
  instanceBytes: 10,
  ...extra,
});
const idle = (name: string, extra: Partial<InstanceWindow> = {}): InstanceWindow =>
  hot(name, { requests: 0, meanQueueNs: 0, busyFraction: 0, ...extra });

/** Run windows in a row, carrying streaks; returns each window's changes. */
function run(windows: InstanceWindow[][], p = policy) {
  let streaks = new Map<string, Streak>();
  return windows.map((ms) => {
    const d = decideInstances(ms, streaks, p);
    streaks = d.streaks;
    return d.changes;
  });
}

describe('decideInstances', () => {
  it('adds an instance only after queue time stays high for holdWindows windows', () => {
    expect(run([[hot('a')], [hot('a')]])).toEqual([[], [{ name: 'a', delta: 1 }]]);
    // A calm window in between restarts the streak.
    expect(run([[hot('a')], [hot('a', { meanQueueNs: 0 })], [hot('a')]])).toEqual([[], [], []]);
  });

  it('removes an instance after idleWindows idle windows, never below the configured count', () => {
    const w = [idle('a', { instances: 2 })];
    expect(run([w, w, w, w]).flat()).toEqual([{ name: 'a', delta: -1 }]);
    const atMin = [idle('a')];
    expect(run([atMin, atMin, atMin, atMin, atMin]).flat()).toEqual([]);
  });

  it('restarts the streak after a change (hysteresis), and stops at max', () => {
    const w = [hot('a', { instances: 2 })];
    expect(run([w, w, w, w]).map((c) => c.length)).toEqual([0, 1, 0, 1]);
    expect(run([[hot('a', { instances: 3 })], [hot('a', { instances: 3 })]]).flat()).toEqual([]);
  });

  it('stays within the cores in use and the free budget, longest wait first', () => {
    const busy = [hot('a', { meanQueueNs: 5e6 }), hot('b', { meanQueueNs: 9e6 }), idle('c', { instances: 1 })];
    // a and b use 2 of 3 cores: only one more, and b waits longest.
    expect(run([busy, busy], { ...policy, cores: 3 })[1]).toEqual([{ name: 'b', delta: 1 }]);
    // Memory for neither.
    expect(run([busy, busy], { ...policy, freeBytes: 5 })[1]).toEqual([]);
    // A machine whose cores other work keeps busy: adding would only add contention.
    expect(run([busy, busy], { ...policy, idleCores: 0.2 })[1]).toEqual([]);
    expect(run([busy, busy], { ...policy, idleCores: 1 })[1]).toEqual([{ name: 'b', delta: 1 }]);
  });

  it('moves capacity: the idle model shrinks while the busy one grows', () => {
    const w = [hot('a'), idle('b', { instances: 2 })];
    const out = run([w, w, w, w], { ...policy, cores: 2 }).flat();
    expect(out).toContainEqual({ name: 'b', delta: -1 });
    expect(out).toContainEqual({ name: 'a', delta: 1 });
  });
});
