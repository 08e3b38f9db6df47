// Adaptive instance counts (ours; Triton's instance_group count is fixed):
// the pure decision of which models gain or lose one execution instance,
// from one observation window of each. A model whose requests keep waiting
// (mean queue time above a threshold for `holdWindows` windows in a row)
// gains an instance, if the cores in use and the memory budget leave room; a
// model that keeps sitting idle for `idleWindows` windows loses one, down to
// its configured count. An instance is only added while the machine has a
// core to spare (counting every process, not only this engine's instances).
// Every change restarts the model's streak, which is
// the hysteresis that keeps counts from flapping.

export interface InstanceWindow {
  name: string;
  instances: number;
  /** instance_group count: never fewer. */
  min: number;
  /** parameters max_instance_count: never more. */
  max: number;
  /** Requests that left the queue in the window, and their mean queue time. */
  requests: number;
  meanQueueNs: number;
  /** Execution time in the window over (window × instances), 0..1. */
  busyFraction: number;
  /** Bytes one more instance costs. */
  instanceBytes: number;
}

/** Consecutive windows of pressure / idleness, carried from one decision to the next. */
export interface Streak {
  high: number;
  low: number;
}

export interface InstancePolicy {
  /** Mean queue time above which a window counts as pressure. */
  addQueueNs: number;
  /** Busy fraction below which a window counts as idle. */
  idleBusyFraction: number;
  holdWindows: number;
  idleWindows: number;
  /** Cores execution may use: instances of models with traffic in the window count against it. */
  cores: number;
  /** Budget bytes still free (Infinity without a budget). */
  freeBytes: number;
  /** Cores the whole machine left idle in the window (other processes count too). */
  idleCores: number;
  /** An instance is added only while at least this much of a core sits idle: on a saturated host a new instance only adds contention. */
  minIdleCores: number;
}

export const DEFAULT_INSTANCE_POLICY: Omit<InstancePolicy, 'cores' | 'freeBytes' | 'idleCores'> = {
  addQueueNs: 2_000_000,
  idleBusyFraction: 0.05,
  holdWindows: 2,
  idleWindows: 4,
  minIdleCores: 0.5,
};

export interface InstanceDecision {
  changes: Array<{ name: string; delta: 1 | -1 }>;
  streaks: Map<string, Streak>;
}

/** Decide this window's changes; `streaks` holds each model's streak from the last call (absent = none). */
export function decideInstances(
  models: readonly InstanceWindow[],
  streaks: ReadonlyMap<string, Streak>,
  policy: InstancePolicy,
): InstanceDecision {
  const next = new Map<string, Streak>();
  const changes: InstanceDecision['changes'] = [];
  let coresInUse = models.filter((m) => m.requests > 0).reduce((a, m) => a + m.instances, 0);
  let freeBytes = policy.freeBytes;
  let idleCores = policy.idleCores;
  const wantMore: InstanceWindow[] = [];
  for (const m of models) {
    const prev = streaks.get(m.name) ?? { high: 0, low: 0 };
    const pressure = m.requests > 0 && m.meanQueueNs > policy.addQueueNs;
    const idle = m.busyFraction < policy.idleBusyFraction;
    const s = { high: pressure ? prev.high + 1 : 0, low: idle && !pressure ? prev.low + 1 : 0 };
    next.set(m.name, s);
    if (s.low >= policy.idleWindows && m.instances > m.min) {
      changes.push({ name: m.name, delta: -1 });
      next.set(m.name, { high: 0, low: 0 });
      if (m.requests > 0) coresInUse -= 1;
      freeBytes += m.instanceBytes;
    } else if (s.high >= policy.holdWindows && m.instances < m.max) {
      wantMore.push(m);
    }
  }
  // The longest waits first, while cores and memory last.
  for (const m of wantMore.sort((a, b) => b.meanQueueNs - a.meanQueueNs)) {
    if (coresInUse + 1 > policy.cores || m.instanceBytes > freeBytes || idleCores < policy.minIdleCores) continue;
    changes.push({ name: m.name, delta: 1 });
    next.set(m.name, { high: 0, low: 0 });
    coresInUse += 1;
    freeBytes -= m.instanceBytes;
    idleCores -= 1;
  }
  return { changes, streaks: next };
}
