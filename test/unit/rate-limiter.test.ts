import { describe, expect, it } from 'vitest';
import { parseResourceFlag, pickNext, resourceCapacities, type Waiting } from '../../engine/sharing/rate-limiter-decision.ts';
import { RateLimiter } from '../../engine/sharing/rate-limiter.ts';
import type { ModelConfig } from '../../engine/api/model-config.ts';
import type { ExecuteResult, ExecutionInstance } from '../../engine/api/scheduler.ts';

const need = (name: string, count: number, global = false) => ({ name, count, global });

describe('resourceCapacities', () => {
  it("defaults each resource to the most one instance needs (Triton's example)", () => {
    const cap = resourceCapacities(
      [
        { device: 0, needs: [need('R1', 4), need('R2', 4)] },
        { device: 0, needs: [need('R2', 5), need('R3', 10), need('R4', 5)] },
        { device: 0, needs: [need('R1', 1), need('R3', 7), need('R4', 2)] },
      ],
      [],
    );
    expect(Object.fromEntries(cap)).toEqual({ '0:R1': 4, '0:R2': 5, '0:R3': 10, '0:R4': 5 });
  });

  it('takes flag counts per device, for all devices, and for global resources', () => {
    const flags = ['R1:10', 'R2:5:0', 'R2:8:1', 'R3:2'].map(parseResourceFlag);
    const cap = resourceCapacities(
      [
        { device: 0, needs: [need('R1', 1), need('R2', 1), need('R3', 1, true)] },
        { device: 1, needs: [need('R1', 1), need('R2', 1)] },
      ],
      flags,
    );
    expect(Object.fromEntries(cap)).toEqual({ '0:R1': 10, '0:R2': 5, 'g:R3': 2, '1:R1': 10, '1:R2': 8 });
    expect(() => resourceCapacities([{ device: 0, needs: [need('R1', 11)] }], flags)).toThrow(/R1.*10 copies/);
    expect(() => parseResourceFlag('R1')).toThrow(/--rate-limit-resource/);
    expect(() => parseResourceFlag('R1:x')).toThrow();
  });
});

describe('pickNext', () => {
  const w = (pass: number, seq: number, needs = [need('R', 1)]): Waiting => ({ device: 0, needs, pass, seq });
  it('grants only waiters whose resources are free; lowest pass, then earliest', () => {
    const free = new Map([['0:R', 1]]);
    expect(pickNext([w(2, 0), w(1, 1), w(1, 2)], free)).toBe(1);
    expect(pickNext([w(0, 0, [need('R', 2)]), w(5, 1)], free)).toBe(1); // the big one does not fit
    expect(pickNext([w(0, 0)], new Map([['0:R', 0]]))).toBe(-1);
    expect(pickNext([w(3, 0, [])], new Map())).toBe(0); // no resources: always runs
  });
});

describe('RateLimiter', () => {
  /** An instance whose executions finish when the test says. */
  function manual(name: string) {
    const running: Array<() => void> = [];
    const inst: ExecutionInstance = {
      name,
      execute: () =>
        new Promise<ExecuteResult>((resolve) =>
          running.push(() => resolve({ responses: [], timing: { computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0 } })),
        ),
    };
    return { inst, running };
  }
  const config = (name: string, priority: number, resources = [{ name: 'R', count: 1 }]): ModelConfig =>
    ({
      name,
      max_batch_size: 0,
      input: [],
      output: [],
      instance_group: [{ name, kind: 'KIND_CPU', count: 1, rate_limiter: { resources, priority } }],
    }) as ModelConfig;
  // Two turns: the release's deferred grant, then the granted execution starting.
  const tick = async () => {
    for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
  };

  it('runs two models sharing one resource one at a time, weighted by priority', async () => {
    const rl = new RateLimiter();
    const a = manual('a_0');
    const b = manual('b_0');
    const [ia] = rl.register('a', config('a', 1), [a.inst]).instances;
    const [ib] = rl.register('b', config('b', 2), [b.inst]).instances;
    const order: string[] = [];
    // Each model keeps one execution waiting at all times (a busy model with one instance).
    const loop = async (name: string, inst: ExecutionInstance, n: number) => {
      for (let i = 0; i < n; i++) {
        await inst.execute([]);
        order.push(name);
      }
    };
    const done = Promise.all([loop('a', ia!, 12), loop('b', ib!, 6)]);
    for (let step = 0; step < 18; step++) {
      await tick();
      const running = a.running.length + b.running.length;
      expect(running).toBe(1); // never both at once
      (a.running.shift() ?? b.running.shift())!();
    }
    await done;
    // While both wait, a (priority 1) gets two turns for each of b's (priority 2).
    const first9 = order.slice(0, 9);
    expect(first9.filter((x) => x === 'a').length).toBe(6);
    expect(first9.filter((x) => x === 'b').length).toBe(3);
  });

  it('lets instances without shared resources run together and forgets unloaded ones', async () => {
    const rl = new RateLimiter();
    const a = manual('a_0');
    const b = manual('b_0');
    const ra = rl.register('a', config('a', 1, [{ name: 'RA', count: 1 }]), [a.inst]);
    rl.register('b', config('b', 1, [{ name: 'RB', count: 1 }]), [b.inst]);
    void ra.instances[0]!.execute([]);
    void rl.register('c', config('c', 1, []), [manual('c_0').inst]);
    const [ib] = rl.register('b2', config('b2', 1, [{ name: 'RB', count: 1 }]), [manual('b2_0').inst]).instances;
    void ib!.execute([]);
    await tick();
    expect(a.running.length).toBe(1);
    expect(rl.free().get('0:RA')).toBe(0);
    a.running.shift()!();
    await tick();
    ra.unregister();
    expect(rl.free().has('0:RA')).toBe(false);
  });

  it('refuses a model whose needs exceed the flag', () => {
    const rl = new RateLimiter([{ name: 'R', count: 1 }]);
    expect(() => rl.register('a', config('a', 1, [{ name: 'R', count: 2 }]), [manual('a_0').inst])).toThrow(/model 'a'.*'R' has 1 copies/);
  });
});
