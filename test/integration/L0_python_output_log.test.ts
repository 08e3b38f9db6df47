// A Python model's output in the engine's log is bounded (engine/backends/python/stub-output-log.ts, issue 41):
// a real stub printing 8 MB in one call (8,192 lines of 1 KiB, then one 1 MiB line) leaves at most
// 100 lines a second in the log, long lines cut with a count, and a line saying how much was dropped.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { setLogFile, setQuiet } from '../../common/logger.ts';
import { httpJson } from './helpers.ts';
import { pythonRepo, pythonEngine } from './python-support.ts';
import type { RunningEngine } from '../../engine/server/server.ts';

const CHATTY = {
  config: `name: "chatty"
backend: "python"
input [ { name: "X", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "Y", data_type: TYPE_INT32, dims: [ 1 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
`,
  model: `import sys
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for i in range(8192):
            print("chatty-line %05d " % i + "x" * 1000)
        print("chatty-long " + "y" * (1 << 20))
        sys.stdout.flush()
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.array([7], dtype=np.int32))]) for _ in requests]
`,
};

let eng: RunningEngine;
const logFile = path.join(os.tmpdir(), `l0-py-output-${process.pid}.log`);

pythonEngine(
  () => {
    setLogFile(logFile);
    setQuiet(false); // the model's lines are info lines
    return pythonRepo('l0-py-output', [], { chatty: CHATTY });
  },
  (s) => ({ eng } = s),
  { controlMode: 'explicit', loadModels: ['*'], grpcPort: -1, metricsPort: -1 },
);

describe('L0_python_output_log', () => {
  it('8 MB printed in one call: the call succeeds; the log gets at most 100 lines a second, cut, with a count of the rest', async () => {
    const r = await httpJson(eng.httpPort, 'POST', '/v2/models/chatty/infer', {
      inputs: [{ name: 'X', datatype: 'INT32', shape: [1], data: [1] }],
    });
    expect(r.status).toBe(200);
    let text = '';
    const accounted = () => {
      const drops = [...text.matchAll(/: (\d+) lines \((\d+) characters\) of model output dropped from the log/g)].reduce(
        (n, m) => n + Number(m[1]),
        0,
      );
      return drops + text.split('\n').filter((l) => l.includes('chatty-line')).length;
    };
    for (let i = 0; i < 80 && accounted() < 8192; i++) {
      await new Promise((res) => setTimeout(res, 250));
      text = fs.readFileSync(logFile, 'utf8');
    }
    setLogFile(undefined);
    setQuiet(true);
    fs.rmSync(logFile, { force: true });
    const lines = text.split('\n').filter((l) => l.includes('chatty-line'));
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.length).toBeLessThanOrEqual(300); // 100 a second over the few seconds the output takes; before: 8,192
    expect(text, 'a line counting what was dropped').toMatch(
      /python [^:]*chatty[^:]*: \d+ lines \(\d+ characters\) of model output dropped from the log/,
    );
    expect(accounted()).toBeGreaterThanOrEqual(8192); // every line either logged or counted
    expect(Math.max(...text.split('\n').map((l) => l.length))).toBeLessThan(5000); // the 1 MiB line is cut
  }, 60_000);
});
