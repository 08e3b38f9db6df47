import { describe, expect, it } from 'vitest';
import { ensemblesInDependencyOrder } from '../../engine/repository/ensemble-load-order.ts';

describe('ensemblesInDependencyOrder', () => {
  it('puts an ensemble after the ensembles its steps run, whatever the name order', () => {
    const steps = new Map([
      ['a_outer', ['m_middle', 'plain']],
      ['m_middle', ['z_inner']],
      ['z_inner', ['plain']],
      ['b_alone', ['plain']],
    ]);
    expect(ensemblesInDependencyOrder(steps)).toEqual(['z_inner', 'm_middle', 'a_outer', 'b_alone']);
  });
  it('ends on a cycle and keeps every name once (the load reports the cycle)', () => {
    const order = ensemblesInDependencyOrder(
      new Map([
        ['a', ['b']],
        ['b', ['a']],
      ]),
    );
    expect(order.sort()).toEqual(['a', 'b']);
  });
});
