// Which python interpreter runs a model's stub: the model's
// `parameters { key: "EXECUTION_ENV_PATH" }`, else the engine's
// `--backend-config=python,python-executable=...` (or `execution-env-path`),
// else `python3` from PATH. An environment directory means its bin/python3.
// Triton's conda-pack archives (.tar.gz) are not unpacked here.
import fs from 'node:fs';
import path from 'node:path';
import type { ModelConfig } from '../../api/model-config.ts';
import { unavailable } from '../../api/status.ts';

/** The interpreter to spawn; throws UNAVAILABLE naming the setting when it points nowhere. */
export function resolveInterpreter(config: ModelConfig, modelDir: string, backendConfig: Record<string, string> = {}): string {
  const fromModel = config.parameters?.EXECUTION_ENV_PATH?.string_value;
  if (fromModel)
    return fromEnvPath(fromModel.replaceAll('$$TRITON_MODEL_DIRECTORY', modelDir), `model '${config.name}' parameter EXECUTION_ENV_PATH`);
  if (backendConfig['python-executable'])
    return fromEnvPath(backendConfig['python-executable'], '--backend-config=python,python-executable');
  if (backendConfig['execution-env-path'])
    return fromEnvPath(backendConfig['execution-env-path'], '--backend-config=python,execution-env-path');
  return 'python3';
}

function fromEnvPath(p: string, source: string): string {
  if (/\.(tar\.gz|tgz)$/.test(p)) {
    throw unavailable(`${source} '${p}' is a packed environment: unpack it and name the directory or its interpreter`);
  }
  let st: fs.Stats;
  try {
    st = fs.statSync(p);
  } catch {
    throw unavailable(`python interpreter '${p}' not found (${source})`);
  }
  if (!st.isDirectory()) return p;
  const bin = path.join(p, 'bin', 'python3');
  if (!fs.existsSync(bin)) throw unavailable(`python interpreter '${bin}' not found (${source} names an environment without bin/python3)`);
  return bin;
}
