// Triton's L0_backend_python/model_control (model_control_test.py,
// ModelIDValidationTest), driven as its test drives Triton: explicit mode, a
// load over HTTP with a JSON `config` and the model file as
// `file:/1/model.py` (a leading slash: Triton joins it onto the model
// folder), the model name unencoded in the URL as curl sends it. Valid names
// load and serve; names with the python backend's invalid stub characters
// are refused with its text and never become ready.
import http from 'node:http';
import { describe, expect, it } from 'vitest';
import { httpJson } from './helpers.ts';
import { pythonEngine, pythonRepo, type PythonEngine } from './python-support.ts';

const identity = (name: string) => `import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        print('Hello world from model ${name.replace(/[\\']/g, '')}')
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())]) for r in requests]
`;

/** The load request of the QA test, the path written byte for byte (no percent-encoding). */
function loadRaw(port: number, model: string): Promise<{ status: number; text: string }> {
  const config = {
    name: model,
    backend: 'python',
    max_batch_size: 4,
    input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
    output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
  };
  const body = Buffer.from(
    JSON.stringify({ parameters: { config: JSON.stringify(config), 'file:/1/model.py': Buffer.from(identity(model)).toString('base64') } }),
  );
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: `/v2/repository/models/${model}/load`,
        headers: { 'Content-Type': 'application/json', 'Content-Length': body.length },
        agent: false,
      },
      (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

let s: PythonEngine;
pythonEngine(
  () => pythonRepo('l0-py-model-control', []),
  (x) => (s = x),
  { controlMode: 'explicit' },
);

const ready = async (name: string) =>
  (await httpJson(s.eng.httpPort, 'GET', `/v2/models/${encodeURIComponent(name)}/ready`)).status === 200;

describe('L0_python_model_control', () => {
  it('valid names load from a config and file:/1/model.py, serve, and unload', async () => {
    for (const name of ['TestModel123', 'model-with-hyphens', 'model_with_underscores']) {
      const r = await loadRaw(s.eng.httpPort, name);
      expect([name, r.status, r.text]).toEqual([name, 200, '']);
      expect(await ready(name)).toBe(true);
      const inf = await httpJson(s.eng.httpPort, 'POST', `/v2/models/${name}/infer`, {
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 3], data: [1, 2, 3] }],
      });
      expect(inf.json.outputs[0].data).toEqual([1, 2, 3]);
      expect((await httpJson(s.eng.httpPort, 'POST', `/v2/repository/models/${name}/unload`)).status).toBe(200);
      expect(await ready(name)).toBe(false);
    }
  });

  it("names with the stub's invalid characters are refused with Triton's text and never become ready", async () => {
    // The QA list (INVALID_CHARS ;|&$`<>()[]{}\"'*?~#!) less '[', '?' and '#', which a URL cannot carry unencoded.
    for (const name of [
      'model;test',
      'model|test',
      'model&test',
      'model$test',
      'model`test`',
      'model<test>',
      'model(test)',
      'model{test}',
      'model"test"',
      "model'test'",
      'model*test',
      'model~test',
      'model!test',
    ]) {
      const r = await loadRaw(s.eng.httpPort, name);
      expect([name, r.status]).toEqual([name, 400]);
      expect(JSON.parse(r.text).error).toBe(`failed to load '${name}': Invalid stub name: contains invalid characters`);
      expect(await ready(name)).toBe(false);
    }
    // A backslash is refused earlier, at every entry point, as a path separator (the engine's own text).
    const r = await loadRaw(s.eng.httpPort, 'model\\test');
    expect(r.status).toBe(400);
    expect(await ready('model\\test')).toBe(false);
  });
});
