// The load-time walk over an ensemble's decoupled steps (config/ensemble-decoupled.ts,
// after Triton's decouple labels in ValidateEnsembleConfig), through buildEnsemblePlan.
import { describe, expect, it } from 'vitest';
import { parseModelConfigText } from '../../engine/config/model-config-parser.ts';
import { normalizeModelConfig } from '../../engine/config/model-config-utils.ts';
import { buildEnsemblePlan } from '../../engine/config/ensemble-utils.ts';
import type { ModelConfig } from '../../engine/api/model-config.ts';

function config(name: string, text: string): ModelConfig {
  const file = `${name}/config.pbtxt`;
  return normalizeModelConfig(parseModelConfigText(`name: "${name}"\n${text}`, file), { modelName: name, file, strict: true });
}
const IO = (ins: string[], outs: string[]) =>
  ins.map((n) => `input { name: "${n}" data_type: TYPE_INT32 dims: [1] }`).join(' ') +
  ' ' +
  outs.map((n) => `output { name: "${n}" data_type: TYPE_INT32 dims: [1] }`).join(' ');
const MODELS = new Map<string, ModelConfig>([
  ['dec', config('dec', `backend: "js" max_batch_size: 0 model_transaction_policy { decoupled: true } ${IO(['X'], ['Y'])}`)],
  ['plain', config('plain', `backend: "js" max_batch_size: 0 ${IO(['X'], ['Y'])}`)],
  ['add', config('add', `backend: "js" max_batch_size: 0 ${IO(['A', 'B'], ['S'])}`)],
]);

type Step = [model: string, inputs: Record<string, string>, outputs: Record<string, string>];
function plan(steps: Step[], outputs = ['OUT']) {
  const map = (kind: string, m: Record<string, string>) =>
    Object.entries(m)
      .map(([k, v]) => `${kind} { key: "${k}" value: "${v}" }`)
      .join(' ');
  const text = `platform: "ensemble" max_batch_size: 0
    input { name: "IN" data_type: TYPE_INT32 dims: [1] }
    ${outputs.map((o) => `output { name: "${o}" data_type: TYPE_INT32 dims: [1] }`).join(' ')}
    ensemble_scheduling { step [ ${steps.map(([m, i, o]) => `{ model_name: "${m}" ${map('input_map', i)} ${map('output_map', o)} }`).join(', ')} ] }`;
  return buildEnsemblePlan(config('e', text), (n) => MODELS.get(n), 'e/config.pbtxt');
}
function planError(steps: Step[], outputs?: string[]): string {
  try {
    plan(steps, outputs);
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('expected the plan to be refused');
}

describe('decoupled steps in an ensemble', () => {
  it('a plain chain is not decoupled; its outputs come once', () => {
    const p = plan([
      ['plain', { X: 'IN' }, { Y: 'MID' }],
      ['plain', { X: 'MID' }, { Y: 'OUT' }],
    ]);
    expect(p).toMatchObject({ decoupled: false, outputDepth: 0 });
    expect(p.steps.map((s) => s.decoupled)).toEqual([false, false]);
  });

  it('a decoupled step makes the ensemble decoupled; the steps after it run once per response', () => {
    const p = plan([
      ['dec', { X: 'IN' }, { Y: 'MID' }],
      ['plain', { X: 'MID' }, { Y: 'OUT' }],
    ]);
    expect(p).toMatchObject({ decoupled: true, outputDepth: 1 });
    expect(p.steps.map((s) => s.decoupled)).toEqual([true, false]);
  });

  it('two decoupled steps in a row: outputs two levels down; a decoupled last step counts too', () => {
    expect(
      plan([
        ['dec', { X: 'IN' }, { Y: 'MID' }],
        ['dec', { X: 'MID' }, { Y: 'OUT' }],
      ]).outputDepth,
    ).toBe(2);
    expect(
      plan([
        ['plain', { X: 'IN' }, { Y: 'MID' }],
        ['dec', { X: 'MID' }, { Y: 'OUT' }],
      ]),
    ).toMatchObject({ decoupled: true, outputDepth: 1 });
  });

  it('refuses a step whose inputs come from the ensemble inputs and a decoupled step, naming both tensors', () => {
    const msg = planError([
      ['dec', { X: 'IN' }, { Y: 'MID' }],
      ['add', { A: 'IN', B: 'MID' }, { S: 'OUT' }],
    ]);
    expect(msg).toContain("e/config.pbtxt: ensemble 'e': step[1] (model 'add') receives inputs originated from different decoupled models");
    expect(msg).toContain("'IN' from the ensemble inputs, 'MID' from the responses of decoupled step[0] (model 'dec')");
  });

  it('refuses two decoupled steps feeding one step', () => {
    const msg = planError([
      ['dec', { X: 'IN' }, { Y: 'M1' }],
      ['dec', { X: 'IN' }, { Y: 'M2' }],
      ['add', { A: 'M1', B: 'M2' }, { S: 'OUT' }],
    ]);
    expect(msg).toContain("step[2] (model 'add') receives inputs originated from different decoupled models");
  });

  it('refuses outputs from different flows', () => {
    const msg = planError(
      [
        ['dec', { X: 'IN' }, { Y: 'OUT' }],
        ['plain', { X: 'IN' }, { Y: 'OTHER' }],
      ],
      ['OUT', 'OTHER'],
    );
    expect(msg).toContain(
      "its outputs originate from different decoupled models: 'OUT' from the responses of decoupled step[0] (model 'dec'), 'OTHER' from the ensemble inputs",
    );
  });

  it('accepts two steps on one decoupled flow meeting again downstream', () => {
    const p = plan([
      ['dec', { X: 'IN' }, { Y: 'MID' }],
      ['plain', { X: 'MID' }, { Y: 'P' }],
      ['add', { A: 'MID', B: 'P' }, { S: 'OUT' }],
    ]);
    expect(p).toMatchObject({ decoupled: true, outputDepth: 1 });
  });
});
