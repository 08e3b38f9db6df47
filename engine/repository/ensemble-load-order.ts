// The order a repository's ensembles load in: an ensemble after every
// ensemble its steps run, so a nested ensemble's plan finds its inner
// ensemble READY (Triton loads by its dependency graph). Pure.

/** Ensemble names with every ensemble after the ensembles its steps run (a cycle keeps name order; its load reports it). */
export function ensemblesInDependencyOrder(steps: ReadonlyMap<string, readonly string[]>): string[] {
  const order: string[] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (n: string) => {
    if (state.has(n)) return;
    state.set(n, 'visiting');
    for (const dep of steps.get(n) ?? []) if (steps.has(dep)) visit(dep);
    state.set(n, 'done');
    order.push(n);
  };
  for (const n of steps.keys()) visit(n);
  return order;
}
