// Decoupled steps in an ensemble (Triton's ValidateEnsembleConfig, its
// "decouple label" walk): every response of a decoupled step starts its own
// run of the steps downstream, so each tensor belongs to one "flow": the
// ensemble's inputs, or the responses of one decoupled step. A step whose
// inputs come from two flows could not pair them, nor could the ensemble's
// outputs: both are refused at load, as Triton does. An ensemble with a
// decoupled step is itself decoupled. Pure; runs once at load.
import { isDecoupled } from '../api/decoupled.ts';
import type { ModelConfig } from '../api/model-config.ts';

/** What the scheduler needs: which steps stream, and how many decoupled steps lie between the inputs and the outputs. */
export interface DecoupledFlow {
  /** Some step is decoupled: the ensemble answers with a stream (model_transaction_policy { decoupled: true }). */
  decoupled: boolean;
  /** Per step: its model is decoupled. */
  stepDecoupled: boolean[];
  /** Decoupled steps on the way from the inputs to the ensemble outputs (0: the outputs come once per request). */
  outputDepth: number;
}

interface FlowStep {
  index: number;
  modelName: string;
  inputs: { tensor: string }[];
  outputs: { tensor: string }[];
}

/** The flow of every tensor; throws (through `fail`) where two flows meet. `order`: producers before consumers. */
export function decoupledFlow(
  steps: readonly FlowStep[],
  models: readonly ModelConfig[],
  order: readonly number[],
  ensembleInputs: readonly string[],
  ensembleOutputs: readonly string[],
  fail: (what: string) => Error,
): DecoupledFlow {
  // A flow: 0 = the ensemble's inputs, k = the responses of the k-th decoupled step reached; depth = decoupled steps passed.
  const flowOf = new Map<string, { flow: number; depth: number; from: string }>();
  for (const t of ensembleInputs) flowOf.set(t, { flow: 0, depth: 0, from: 'the ensemble inputs' });
  const stepDecoupled = models.map((m) => isDecoupled(m));
  let flows = 0;
  for (const i of order) {
    const s = steps[i]!;
    const ins = s.inputs.map((p) => ({ ...flowOf.get(p.tensor)!, tensor: p.tensor }));
    const first = ins[0] ?? { tensor: '', flow: 0, depth: 0, from: 'the ensemble inputs' };
    const other = ins.find((x) => x.flow !== first.flow);
    if (other) {
      throw fail(
        `step[${i}] (model '${s.modelName}') receives inputs originated from different decoupled models: ` +
          `'${first.tensor}' from ${first.from}, '${other.tensor}' from ${other.from}`,
      );
    }
    const out = stepDecoupled[i]
      ? { flow: ++flows, depth: first.depth + 1, from: `the responses of decoupled step[${i}] (model '${s.modelName}')` }
      : { flow: first.flow, depth: first.depth, from: first.from };
    for (const p of s.outputs) flowOf.set(p.tensor, out);
  }
  const outs = ensembleOutputs.map((t) => ({ ...flowOf.get(t)!, tensor: t }));
  const firstOut = outs[0]!;
  const otherOut = outs.find((x) => x.flow !== firstOut.flow);
  if (otherOut) {
    throw fail(
      `its outputs originate from different decoupled models: '${firstOut.tensor}' from ${firstOut.from}, '${otherOut.tensor}' from ${otherOut.from}`,
    );
  }
  return { decoupled: stepDecoupled.some(Boolean), stepDecoupled, outputDepth: firstOut.depth };
}
