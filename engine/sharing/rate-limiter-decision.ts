// The rate limiter's decisions (Triton's RateLimiter), pure: how many copies
// of each resource exist, whether an instance's needs fit what is free, and
// which waiting instance runs next. Priorities are weights by stride
// scheduling: each grant advances the instance's pass by its priority, and
// the eligible waiter with the lowest pass goes next, so an instance of
// priority 2 gets half the turns of one of priority 1 while both wait.

/** One resource an instance holds while it executes (ModelRateLimiter.Resource). */
export interface ResourceNeed {
  name: string;
  /** Shared by every device rather than one copy per device. */
  global: boolean;
  count: number;
}

/** What the limiter knows of one execution instance. */
export interface LimitedInstance {
  /** The device it runs on (GPU id; 0 for CPU instances). */
  device: number;
  needs: ResourceNeed[];
}

/** A `--rate-limit-resource=<name>:<count>[:<device>]` value. */
export interface ResourceFlag {
  name: string;
  count: number;
  /** Undefined: every device (and the global pool). */
  device?: number;
}

/** Key of a resource pool: `g:<name>` for global resources, `<device>:<name>` otherwise. */
export function poolKey(need: { name: string; global: boolean }, device: number): string {
  return need.global ? `g:${need.name}` : `${device}:${need.name}`;
}

/** Parse one --rate-limit-resource value. */
export function parseResourceFlag(v: string): ResourceFlag {
  const parts = v.split(':');
  const count = Number(parts[1]);
  const device = parts[2] === undefined ? undefined : Number(parts[2]);
  if (
    parts.length < 2 ||
    parts.length > 3 ||
    !parts[0] ||
    !Number.isInteger(count) ||
    count < 0 ||
    (device !== undefined && !(Number.isInteger(device) && device >= 0))
  ) {
    throw new Error(`--rate-limit-resource: expected <name>:<count>[:<device>], got '${v}'`);
  }
  return { name: parts[0], count, device };
}

/**
 * Copies of every resource the instances use: the flag's count where one is
 * given (for that device, else for all), otherwise the most any single
 * instance needs, so every instance can run. Throws when a flag gives fewer
 * copies than one instance needs (it could never run).
 */
export function resourceCapacities(instances: readonly LimitedInstance[], flags: readonly ResourceFlag[]): Map<string, number> {
  const cap = new Map<string, number>();
  for (const inst of instances) {
    for (const n of inst.needs) {
      const key = poolKey(n, inst.device);
      const flag =
        flags.find((f) => f.name === n.name && f.device === (n.global ? undefined : inst.device)) ??
        flags.find((f) => f.name === n.name && f.device === undefined);
      if (flag) {
        if (flag.count < n.count)
          throw new Error(`rate limiter: resource '${n.name}' has ${flag.count} copies but an instance needs ${n.count}`);
        cap.set(key, flag.count);
      } else {
        cap.set(key, Math.max(cap.get(key) ?? 0, n.count));
      }
    }
  }
  return cap;
}

/** Whether `inst`'s needs are all free in `free` (pool key -> free copies). */
export function fits(inst: LimitedInstance, free: ReadonlyMap<string, number>): boolean {
  return inst.needs.every((n) => (free.get(poolKey(n, inst.device)) ?? 0) >= n.count);
}

/** A waiting execution: its instance, its stride pass, and its arrival order. */
export interface Waiting extends LimitedInstance {
  pass: number;
  seq: number;
}

/** Index of the waiter to grant now: lowest pass among those that fit, then earliest; -1 when none fits. */
export function pickNext(waiting: readonly Waiting[], free: ReadonlyMap<string, number>): number {
  let best = -1;
  for (let i = 0; i < waiting.length; i++) {
    const w = waiting[i]!;
    if (!fits(w, free)) continue;
    const b = waiting[best];
    if (!b || w.pass < b.pass || (w.pass === b.pass && w.seq < b.seq)) best = i;
  }
  return best;
}
