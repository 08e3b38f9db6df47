// Checks one function definition against the engine before a deploy: the
// target model exists and is ready, every mapped input/output names a tensor
// of the target (and every target input is mapped), and the inbound webhook
// mapping names inputs of the function (binary base64 fields need a UINT8 or
// BYTES input). Reaches the engine only through the registry's MetadataSource.
import { checkDefinition, resolveFunction, type MetadataSource } from '../calls/function-registry.ts';
import type { FunctionDefinition } from '../calls/function-schema.ts';

export function engineTargetCheck(engine: Pick<MetadataSource, 'modelMetadata'>): (def: FunctionDefinition) => Promise<string[]> {
  return async (def) => {
    const { model, version } = def.target;
    let md;
    try {
      md = await engine.modelMetadata(model, version);
    } catch (e) {
      return [`target model '${model}'${version ? ` version ${version}` : ''} is not served by the engine (${(e as Error).message})`];
    }
    const problems = checkDefinition(def, md);
    if (problems.length) return problems;
    const fn = resolveFunction(def, md, false);
    for (const input of Object.keys(def.webhook?.inputs ?? {})) {
      if (!fn.inputs.some((s) => s.name === input))
        problems.push(
          `webhook input '${input}' is not an input of the function (it has ${fn.inputs.map((s) => `'${s.name}'`).join(', ')})`,
        );
    }
    return problems;
  };
}
