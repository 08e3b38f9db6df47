// A Python decoupled model sees its client go away: a generate_stream reader
// that disconnects (HTTP), and a gateway streaming call whose client
// disconnects (gateway -> engine over gRPC), both turn the model's
// request.is_cancelled() true; the model stops and says so in a marker file.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { setQuiet } from '../../common/logger.ts';
import { removeDir, startTestEngine } from './helpers.ts';
import { waitFor } from './L0_gateway-support.ts';
import { pythonRepo } from './python-support.ts';
import type { RunningEngine } from '../../engine/server/server.ts';

const PY_TICKER = {
  config: `name: "py_ticker"
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "MARK", data_type: TYPE_STRING, dims: [ 1 ] } ]
output [ { name: "TICK", data_type: TYPE_INT32, dims: [ 1 ] } ]
`,
  // Sends a tick every 20 ms for up to 10 s; once is_cancelled() is true, writes
  // "<ticks sent>" to the MARK path and stops.
  model: `import threading, time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for r in requests:
            mark = pb_utils.get_input_tensor_by_name(r, "MARK").as_numpy()[0].decode()
            threading.Thread(target=self.run, args=(r, mark), daemon=True).start()
        return None

    def run(self, r, mark):
        sender = r.get_response_sender()
        n = 0
        while n < 500:
            if r.is_cancelled():
                with open(mark, "w") as f:
                    f.write(str(n))
                break
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("TICK", np.array([n], dtype=np.int32))]))
            n += 1
            time.sleep(0.02)
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
`,
};

let repo: string;
let fnDir: string;
let engine: RunningEngine;
let gw: RunningGateway;

beforeAll(async () => {
  setQuiet(true);
  repo = pythonRepo('l0-gen-pycancel', [], { py_ticker: PY_TICKER });
  engine = await startTestEngine({ modelRepository: repo, metricsPort: -1 });
  fnDir = mkdtempSync(path.join(os.tmpdir(), 'l0-gen-pycancel-fn-'));
  writeFileSync(path.join(fnDir, 'ticker.json'), JSON.stringify({ name: 'ticker', target: { model: 'py_ticker' } }));
  gw = await startGateway({
    port: 0,
    host: '127.0.0.1',
    engine: `127.0.0.1:${engine.grpcPort}`,
    functions: fnDir,
    shm: false,
    redisUrl: '',
  });
}, 120_000);

afterAll(async () => {
  await gw?.stop();
  await engine?.stop();
  removeDir(repo);
  removeDir(fnDir);
});

/** POST `body` to `url`, read the first chunk of the reply, then drop the connection. */
function readOneThenLeave(url: string, body: string, headers: Record<string, string> = {}): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', headers }, (res) => {
      res.once('data', () => {
        req.destroy();
        resolve();
      });
    });
    req.on('error', () => {});
    req.once('error', reject);
    req.end(body);
  });
}

describe('a Python model sees is_cancelled()', () => {
  it('when a generate_stream reader disconnects', async () => {
    const mark = path.join(os.tmpdir(), `l0-gen-pycancel-${process.pid}-http`);
    rmSync(mark, { force: true });
    await readOneThenLeave(`http://127.0.0.1:${engine.httpPort}/v2/models/py_ticker/generate_stream`, JSON.stringify({ MARK: mark }));
    await waitFor('the model to see is_cancelled()', () => existsSync(mark), 8000);
    expect(Number(readFileSync(mark, 'utf8'))).toBeLessThan(500);
    rmSync(mark, { force: true });
  }, 30_000);

  it("when a gateway streaming call's client disconnects", async () => {
    const mark = path.join(os.tmpdir(), `l0-gen-pycancel-${process.pid}-gw`);
    rmSync(mark, { force: true });
    await readOneThenLeave(`http://127.0.0.1:${gw.port}/fn/ticker`, JSON.stringify({ inputs: { MARK: [mark] } }), {
      'content-type': 'application/json',
      accept: 'text/event-stream',
    });
    await waitFor('the model to see is_cancelled()', () => existsSync(mark), 8000);
    expect(Number(readFileSync(mark, 'utf8'))).toBeLessThan(500);
    rmSync(mark, { force: true });
  }, 30_000);
});
