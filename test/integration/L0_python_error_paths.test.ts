// Errors of Python models name the model and its file, never a path of the
// host (issue 21, item 8): a syntax error, an import or execute failure, a
// path on disk in the exception's own text, a wrong execute return (Triton's
// texts) and a missing model.py all read "(model 'm' 1/model.py:N)" or
// relative paths, without the repository's or the engine's folders.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { httpJson, removeDir, ROOT, startTestEngine } from './helpers.ts';
import { pythonRepo } from './python-support.ts';

const cfg = (n: string) => `name: "${n}"
backend: "python"
max_batch_size: 0
input [ { name: "IN", data_type: TYPE_FP32, dims: [ 1 ] } ]
output [ { name: "OUT", data_type: TYPE_FP32, dims: [ 1 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
`;
const HEAD = 'import os\nimport numpy as np\nimport triton_python_backend_utils as pb_utils\n';
const MODELS = {
  syntax_error: `${HEAD}class TritonPythonModel:\n    def execute(self, requests)\n        pass\n`,
  import_error: `${HEAD}import no_such_module_for_this_test\nclass TritonPythonModel:\n    pass\n`,
  open_fails: `${HEAD}class TritonPythonModel:\n    def initialize(self, args):\n        self.d = args['model_repository']\n    def execute(self, requests):\n        open(os.path.join(self.d, '1', 'weights.bin'))\n`,
  wrong_count: `${HEAD}class TritonPythonModel:\n    def execute(self, requests):\n        return []\n`,
  // After Triton's qa execute_return_error, for the python backend that lets a plain model answer
  // through its response sender (None and a None in the list are no longer errors there): a tuple first, then a list of str.
  execute_return_error: `${HEAD}class TritonPythonModel:\n    def initialize(self, args):\n        self.n = 0\n    def execute(self, requests):\n        self.n += 1\n        return tuple() if self.n == 1 else ['no' for _ in requests]\n`,
};

let engine: RunningEngine;
let repo: string;

beforeAll(async () => {
  repo = pythonRepo('l0-py-paths', [], Object.fromEntries(Object.entries(MODELS).map(([n, model]) => [n, { config: cfg(n), model }])));
  fs.mkdirSync(path.join(repo, 'no_file', '1'), { recursive: true });
  fs.writeFileSync(path.join(repo, 'no_file', 'config.pbtxt'), cfg('no_file'));
  engine = await startTestEngine({ modelRepository: repo });
}, 120_000);
afterAll(async () => {
  await engine?.stop();
  removeDir(repo);
});

/** No folder of the host in a text sent to clients. */
function expectNoHostPaths(text: string): void {
  for (const p of [repo, fs.realpathSync(repo), ROOT, path.join(ROOT, 'engine')]) expect(text).not.toContain(p);
  expect(text).not.toMatch(/\.\.\/|<frozen|stub\.py/);
}

const reasonOf = async (name: string) => {
  const index = (await httpJson(engine.httpPort, 'POST', '/v2/repository/index', {})).json as unknown as Array<{
    name: string;
    reason: string;
  }>;
  return index.find((m) => m.name === name)!.reason;
};
const inferError = async (name: string) =>
  (
    await httpJson(engine.httpPort, 'POST', `/v2/models/${name}/infer`, {
      inputs: [{ name: 'IN', datatype: 'FP32', shape: [1], data: [1] }],
    })
  ).json.error as string;

describe('L0_python_error_paths', () => {
  it('a syntax error: the model and its line, not importlib or the engine', async () => {
    const r = await reasonOf('syntax_error');
    expect(r).toContain("SyntaxError: expected ':' (model 'syntax_error' 1/model.py:5)");
    expectNoHostPaths(r);
  });

  it('an import error names the model file line', async () => {
    const r = await reasonOf('import_error');
    expect(r).toContain("ModuleNotFoundError: No module named 'no_such_module_for_this_test' (model 'import_error' 1/model.py:4)");
    expectNoHostPaths(r);
  });

  it("a path on disk in the exception's text is made relative to the model", async () => {
    const e = await inferError('open_fails');
    expect(e).toContain("FileNotFoundError: [Errno 2] No such file or directory: '1/weights.bin' (model 'open_fails' 1/model.py:8)");
    expectNoHostPaths(e);
  });

  it("a wrong execute return gets Triton's texts (its lifecycle test's), no path", async () => {
    const e = await inferError('wrong_count');
    expect(e).toBe(
      "Failed to process the request(s) for model instance 'wrong_count_0_0', message: Number of InferenceResponse objects do not match the number of InferenceRequest objects. InferenceRequest(s) size is:1, and InferenceResponse(s) size is:0\n",
    );
    expect(await inferError('execute_return_error')).toBe(
      "Failed to process the request(s) for model instance 'execute_return_error_0_0', message: Expected a list in the execute return, found type '<class 'tuple'>'.",
    );
    expect(await inferError('execute_return_error')).toBe(
      "Failed to process the request(s) for model instance 'execute_return_error_0_0', message: Expected an 'InferenceResponse' object in the execute function return list, found type '<class 'str'>'.",
    );
    expectNoHostPaths(e);
  });

  it('a missing model.py is named relative to the model', async () => {
    const r = await reasonOf('no_file');
    expect(r).toContain("model 'no_file' version 1: no 1/model.py");
    expectNoHostPaths(r);
  });
});
