// Triton's rate limiter (--rate-limit=execution_count): across every loaded
// model, an execution instance runs only while the resources its
// instance_group's rate_limiter names are free, and when several wait, the
// priorities decide who goes next (rate-limiter-decision.ts). It wraps each
// instance's execute(), so every scheduler gets it without knowing. Main
// thread only; a grant happens on acquire or on a release.
import type { ModelConfig } from '../api/model-config.ts';
import type { ExecutionInstance } from '../api/scheduler.ts';
import { pickNext, poolKey, resourceCapacities, type LimitedInstance, type ResourceFlag, type Waiting } from './rate-limiter-decision.ts';
import { invalidArg } from '../api/status.ts';
import { tracer } from '../../common/logger.ts';

const trace = tracer('rate-limiter');

interface Registered extends LimitedInstance {
  name: string;
  priority: number;
  /** Stride pass: grows by `priority` on each grant. */
  pass: number;
}

interface Waiter extends Waiting {
  reg: Registered;
  grant: () => void;
}

export class RateLimiter {
  private readonly instances = new Set<Registered>();
  private capacity = new Map<string, number>();
  private readonly used = new Map<string, number>();
  private waiting: Waiter[] = [];
  private seq = 0;
  private grantPending = false;

  constructor(private readonly flags: readonly ResourceFlag[] = []) {}

  /**
   * Wrap a model version's instances (in instance_group order). Returns the
   * wrapped instances and the function that forgets them at unload. Throws
   * INVALID_ARG when a flag leaves too few copies for one of them.
   */
  register(
    modelName: string,
    config: ModelConfig,
    instances: readonly ExecutionInstance[],
  ): { instances: ExecutionInstance[]; unregister: () => void } {
    const specs = instanceSpecs(config, instances);
    const regs: Registered[] = instances.map((inst, i) => ({ name: `${modelName}/${inst.name}`, ...specs[i]!, pass: this.minPass() }));
    try {
      this.capacity = resourceCapacities([...this.instances, ...regs], this.flags);
    } catch (err) {
      throw invalidArg(`model '${modelName}': ${(err as Error).message}`);
    }
    for (const r of regs) this.instances.add(r);
    const wrapped = instances.map((inst, i) => this.wrap(inst, regs[i]!));
    return {
      instances: wrapped,
      unregister: () => {
        for (const r of regs) this.instances.delete(r);
        this.capacity = resourceCapacities([...this.instances], this.flags);
      },
    };
  }

  /** Instances registered (tests). */
  size(): number {
    return this.instances.size;
  }

  /** Free copies per resource pool (tests, metrics). */
  free(): Map<string, number> {
    const out = new Map<string, number>();
    for (const [k, c] of this.capacity) out.set(k, c - (this.used.get(k) ?? 0));
    return out;
  }

  /** A newcomer starts level with the least-served instance, so it neither starves nor monopolizes. */
  private minPass(): number {
    let m = Infinity;
    for (const r of this.instances) m = Math.min(m, r.pass);
    return m === Infinity ? 0 : m;
  }

  private wrap(inst: ExecutionInstance, reg: Registered): ExecutionInstance {
    return {
      name: inst.name,
      execute: async (requests) => {
        await this.acquire(reg);
        try {
          return await inst.execute(requests);
        } finally {
          this.release(reg);
        }
      },
    };
  }

  private acquire(reg: Registered): Promise<void> {
    return new Promise((resolve) => {
      this.waiting.push({ reg, device: reg.device, needs: reg.needs, pass: reg.pass, seq: this.seq++, grant: resolve });
      if (!this.grantPending) this.grant();
    });
  }

  /**
   * Free the resources, and choose the next holder one turn later: the
   * instance that just finished queues its next execution first, so
   * priorities weigh every busy model rather than whoever waited at the instant.
   */
  private release(reg: Registered): void {
    for (const n of reg.needs) {
      const k = poolKey(n, reg.device);
      this.used.set(k, (this.used.get(k) ?? 0) - n.count);
    }
    if (this.grantPending) return;
    this.grantPending = true;
    setImmediate(() => {
      this.grantPending = false;
      this.grant();
    });
  }

  /** Grant every waiter that can run now, in pickNext's order. */
  private grant(): void {
    for (;;) {
      for (const w of this.waiting) w.pass = w.reg.pass;
      const i = pickNext(this.waiting, this.free());
      if (i < 0) return;
      const w = this.waiting.splice(i, 1)[0]!;
      for (const n of w.needs) {
        const k = poolKey(n, w.device);
        this.used.set(k, (this.used.get(k) ?? 0) + n.count);
      }
      w.reg.pass += w.reg.priority;
      trace(`granted '${w.reg.name}' (pass ${w.reg.pass})`);
      w.grant();
    }
  }
}

/** Each instance's device, needs and priority, from the instance_group it was built from. */
function instanceSpecs(config: ModelConfig, instances: readonly ExecutionInstance[]): Array<LimitedInstance & { priority: number }> {
  const groups = config.instance_group ?? [];
  return instances.map((inst, idx) => {
    // Backends name instances `<group name>_<i>` in group order.
    let g = groups.find((x) => inst.name.startsWith(`${x.name}_`) && /^\d+$/.test(inst.name.slice(x.name.length + 1)));
    let k = g ? Number(inst.name.slice(g.name.length + 1)) : idx;
    if (!g) {
      let at = idx;
      g = groups.find((x) => (at < x.count ? true : ((at -= x.count), false)));
      k = at;
    }
    const rl = g?.rate_limiter;
    const gpus = g?.gpus ?? [];
    return {
      device: gpus.length ? gpus[k % gpus.length]! : 0,
      needs: (rl?.resources ?? [])
        .filter((r) => (r.count ?? 0) > 0)
        .map((r) => ({ name: r.name, global: r.global ?? false, count: r.count ?? 0 })),
      priority: Math.max(1, rl?.priority ?? 1),
    };
  });
}
