// The one lifecycle helper (common/lifecycle.ts) and its users: model
// versions, region leases and async jobs move only along their tables and
// fail with one kind of error naming "from X to Y".
import { describe, expect, it } from 'vitest';
import { MODEL_TRANSITIONS, ModelVersion } from '../../engine/repository/model-lifecycle.ts';
import { toStatusError } from '../../engine/api/status.ts';
import { transition as jobTransition } from '../../gateway/jobs/job-state.ts';
import { leaseTransition } from '../../gateway/region-lease.ts';
import { checkTransition, IllegalTransition, Lifecycle } from '../../common/lifecycle.ts';

type S = 'a' | 'b' | 'c';
const TABLE = { a: ['b'], b: ['c', 'a'], c: [] } as const satisfies Record<S, readonly S[]>;

describe('Lifecycle', () => {
  it('moves along the table and refuses anything else with IllegalTransition', () => {
    const l = new Lifecycle<S>(TABLE, 'a', 'thing t');
    expect(l.can('c')).toBe(false);
    expect(l.to('b')).toBe('b');
    expect(l.to('c')).toBe('c');
    let err: unknown;
    try {
      l.to('a');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(IllegalTransition);
    expect((err as IllegalTransition).code).toBe('INTERNAL');
    expect((err as Error).message).toBe('thing t: illegal transition from c to a');
    expect(l.state).toBe('c');
    expect(() => checkTransition<S>(TABLE, 'x', 'a', 'c')).toThrow('x: illegal transition from a to c');
  });

  it('keeps the state private: no assignment from outside', () => {
    const l = new Lifecycle<S>(TABLE, 'a', 't');
    expect(() => {
      (l as unknown as { state: S }).state = 'c';
    }).toThrow(TypeError);
    const mv = new ModelVersion('m', 1, {} as never, {} as never, {} as never, {} as never);
    expect(() => {
      (mv as unknown as { state: string }).state = 'READY';
    }).toThrow(TypeError);
    expect(mv.state).toBe('UNKNOWN');
  });

  it('models, leases and jobs all throw the same kind', () => {
    const mv = new ModelVersion('m', 1, {} as never, {} as never, {} as never, {} as never);
    expect(() => mv.setState('READY')).toThrow(IllegalTransition);
    expect(() => mv.setState('READY')).toThrow("model 'm' version 1: illegal transition from UNKNOWN to READY");
    expect(() => leaseTransition('r', 'released', 'held')).toThrow(IllegalTransition);
    expect(() => jobTransition('delivered', 'running', 'j')).toThrow(IllegalTransition);
    expect(MODEL_TRANSITIONS.READY).toEqual(['UNLOADING']);
  });

  it('the engine reports an illegal move as INTERNAL naming it', () => {
    const se = toStatusError(new IllegalTransition('w', 'X', 'Y'));
    expect(se.code).toBe('INTERNAL');
    expect(se.message).toBe('w: illegal transition from X to Y');
  });
});
