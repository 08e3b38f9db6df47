// Triton's generate extension on the real engine (L0_http's generate tests,
// rewritten for this project): /generate and /generate_stream for JS, Python,
// decoupled and ordinary models; Triton's request shapes and error texts;
// errors mid-stream; a client that closes the stream reaches the model (its
// abort signal) and the statistics; a closed gRPC stream does the same.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeBytesTensor, httpJson, protoLoaderClient, removeDir, startTestEngine, type ProtoClient } from './helpers.ts';
import { pythonRepo } from './python-support.ts';
import { JS_STREAM_CONFIG, JS_STREAM_MODEL, PY_MOCK_LLM_MODEL, pyMockLlmConfig, writeStreamModels } from '../fixtures/stream-models.ts';
import type { RunningEngine } from '../../engine/server/server.ts';

let repo: string;
let engine: RunningEngine;
let grpcClient: ProtoClient;

beforeAll(async () => {
  repo = pythonRepo('l0-generate', [], {
    mock_llm: { config: pyMockLlmConfig('mock_llm', true), model: PY_MOCK_LLM_MODEL },
    mock_llm_unary: { config: pyMockLlmConfig('mock_llm_unary', false), model: PY_MOCK_LLM_MODEL },
  });
  writeStreamModels(repo);
  // js_stream with one instance: a second request waits in the queue while the first streams.
  mkdirSync(path.join(repo, 'js_stream_one', '1'), { recursive: true });
  writeFileSync(
    path.join(repo, 'js_stream_one', 'config.pbtxt'),
    JS_STREAM_CONFIG.replace('"js_stream"', '"js_stream_one"').replace('count: 4', 'count: 1'),
  );
  writeFileSync(path.join(repo, 'js_stream_one', '1', 'model.ts'), JS_STREAM_MODEL);
  engine = await startTestEngine({ modelRepository: repo });
  grpcClient = protoLoaderClient(engine.grpcPort);
}, 120_000);

afterAll(async () => {
  grpcClient?.close();
  await engine?.stop();
  removeDir(repo);
});

const url = (model: string, route: string) => `http://127.0.0.1:${engine.httpPort}/v2/models/${model}/${route}`;
const post = (model: string, route: string, body: unknown) =>
  fetch(url(model, route), {
    method: 'POST',
    body: typeof body === 'string' ? body : JSON.stringify(body),
    headers: { Accept: 'text/event-stream' },
  });

/** Every `data:` event of an SSE body, parsed; checks the framing (each event `data: ...\n\n`, nothing else). */
function sseEvents(text: string): Array<Record<string, unknown>> {
  if (text === '') return [];
  expect(text.endsWith('\n\n')).toBe(true);
  return text
    .slice(0, -2)
    .split('\n\n')
    .map((chunk) => {
      expect(chunk.startsWith('data: ')).toBe(true);
      expect(chunk.includes('\n')).toBe(false);
      return JSON.parse(chunk.slice(6)) as Record<string, unknown>;
    });
}

async function stream(
  model: string,
  body: unknown,
): Promise<{ status: number; type: string | null; events: Array<Record<string, unknown>> }> {
  const r = await post(model, 'generate_stream', body);
  return { status: r.status, type: r.headers.get('content-type'), events: sseEvents(await r.text()) };
}

describe('generate (one response)', () => {
  it("answers a request written from Triton's docs and tests unchanged (Python, decoupled and not)", async () => {
    for (const model of ['mock_llm', 'mock_llm_unary']) {
      const r = await post(model, 'generate', { PROMPT: 'hello world', STREAM: false });
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toContain('application/json');
      expect(await r.json()).toEqual({ model_name: model, model_version: '1', TEXT: 'hello world' });
    }
    // The non-decoupled model repeats along the last dim: more than one element is an array.
    const r = await post('mock_llm_unary', 'generate', { PROMPT: ['hi'], STREAM: false, parameters: { REPETITION: 3 } });
    expect(((await r.json()) as { TEXT: unknown }).TEXT).toEqual(['hi', 'hi', 'hi']);
  });

  it("the example of Triton's generate docs, byte for byte: text_input and parameters in, text_output out", async () => {
    const r = await fetch(url('js_llm', 'generate'), {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: '{\n  "text_input":  "client input",\n  "parameters" :\n    {\n      "stream": false,\n      "temperature": 0\n    }\n}',
    });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toContain('application/json');
    expect(await r.json()).toEqual({
      model_name: 'js_llm',
      model_version: '1',
      text_output: 'client input {"stream":false,"temperature":0}',
    });
    const s = await stream('js_llm', { text_input: 'client input', parameters: { stream: true } });
    expect(s.type).toBe('text/event-stream; charset=utf-8');
    expect(s.events).toEqual([{ model_name: 'js_llm', model_version: '1', text_output: 'client input {"stream":true}' }]);
  });

  it('JS models: batching model with a batch dim, versions path', async () => {
    const r = await fetch(`http://127.0.0.1:${engine.httpPort}/v2/models/js_upper/versions/1/generate`, {
      method: 'POST',
      body: JSON.stringify({ PROMPT: 'abc' }),
    });
    expect(await r.json()).toEqual({ model_name: 'js_upper', model_version: '1', TEXT: 'ABC', LEN: 3 });
    const s = await stream('js_upper', { PROMPT: 'xy' });
    expect(s.events).toEqual([{ model_name: 'js_upper', model_version: '1', TEXT: 'XY', LEN: 2 }]);
  });

  it('a decoupled model with zero or several responses is refused by /generate', async () => {
    for (const rep of [0, 2]) {
      const r = await post('mock_llm', 'generate', { PROMPT: 'hello', STREAM: true, REPETITION: rep });
      expect(r.status).toBe(400);
      expect(((await r.json()) as { error: string }).error).toContain('generate expects model to produce exactly 1 response');
    }
  });

  it("Triton's input errors: missing, wrong JSON type, duplicated, nested parameter", async () => {
    const cases: Array<[unknown, string]> = [
      [{}, 'expected 2 inputs but got 0'],
      [{ abc: 123 }, 'expected 2 inputs but got 0'],
      [{ STREAM: false, other: 'param' }, 'expected 2 inputs but got 1'],
      [{ PROMPT: 123, STREAM: false }, 'attempt to access JSON non-string as string'],
      [{ PROMPT: 'hello', STREAM: 'false' }, 'attempt to access JSON non-boolean as boolean'],
      [{ STREAM: 123, PROMPT: true }, 'attempt to access JSON non-boolean as boolean'],
      ['{"PROMPT": "hello", "STREAM": false, "PROMPT": "duplicate", "STREAM": true}', "input 'PROMPT' already exists in request"],
      ['{"PROMPT": "hello", "STREAM": false, "STREAM": true, "PROMPT": "duplicate"}', "input 'STREAM' already exists in request"],
      [{ PROMPT: 'hello', STREAM: true, PARAMS: { PARAM_0: 0 } }, "parameter 'PARAMS' has invalid type"],
      [{ PROMPT: { USER: 'hello' }, STREAM: true }, 'attempt to access JSON non-string as string'],
    ];
    for (const [body, msg] of cases) {
      for (const route of ['generate', 'generate_stream']) {
        const r = await post('mock_llm', route, body);
        expect(r.status, `${route} ${JSON.stringify(body)}`).toBe(400);
        expect(r.headers.get('content-type')).toContain('application/json');
        expect(((await r.json()) as { error: string }).error).toContain(msg);
      }
    }
    const nf = await post('no_such_model', 'generate', { PROMPT: 'x' });
    expect(nf.status).toBe(404);
  });

  it('is listed in the server metadata extensions', async () => {
    const { json } = await httpJson(engine.httpPort, 'GET', '/v2');
    expect(json.extensions).toContain('generate');
  });
});

describe('generate_stream (server-sent events)', () => {
  it('one data event per response, parameters from top-level keys or the parameters object', async () => {
    for (const body of [
      { PROMPT: ['hello world'], STREAM: true, REPETITION: 3 },
      { PROMPT: ['hello world'], STREAM: true, parameters: { REPETITION: 3 } },
    ]) {
      const s = await stream('mock_llm', body);
      expect(s.status).toBe(200);
      expect(s.type).toContain('text/event-stream');
      expect(s.events).toEqual(Array(3).fill({ model_name: 'mock_llm', model_version: '1', TEXT: 'hello world' }));
    }
    // The final flag alone sends nothing: zero responses is an empty stream.
    expect((await stream('mock_llm', { PROMPT: 'x', STREAM: true, REPETITION: 0 })).events).toEqual([]);
  });

  it('an error mid-stream is an error event after the good ones; as the first response it sets the status', async () => {
    const mid = await stream('mock_llm', { PROMPT: ['hello'], STREAM: true, REPETITION: 1, FAIL_LAST: true });
    expect(mid.status).toBe(200);
    expect(mid.events.length).toBe(2);
    expect(mid.events[0]!.TEXT).toBe('hello');
    expect(mid.events[1]!.error).toContain('An Error Occurred');
    const first = await stream('mock_llm', { PROMPT: ['hello'], STREAM: true, REPETITION: 0, FAIL_LAST: true });
    expect(first.status).toBeGreaterThanOrEqual(400);
    expect(first.type).toContain('text/event-stream');
    expect(first.events).toEqual([{ error: expect.stringContaining('An Error Occurred') }]);
    const js = await stream('js_stream', { PROMPT: 'p', REPETITION: 4, FAIL_AT: 2 });
    expect(js.events.map((e) => e.SEQ ?? e.error)).toEqual([0, 1, 'js_stream failed at 2']);
  });

  it('events arrive as the model sends them, not at the end', async () => {
    const t0 = Date.now();
    const r = await post('js_stream', 'generate_stream', { PROMPT: 'p', REPETITION: 3, DELAY_MS: 300 });
    const reader = r.body!.getReader();
    const first = await reader.read();
    const tFirst = Date.now() - t0;
    expect(new TextDecoder().decode(first.value)).toContain('"SEQ":0');
    while (!(await reader.read()).done);
    const tAll = Date.now() - t0;
    expect(tFirst).toBeLessThan(tAll - 400);
  });

  it('50 concurrent streams each get every event, in order', async () => {
    const runs = await Promise.all(
      Array.from({ length: 50 }, (_, i) => stream('js_stream', { PROMPT: `s${i}`, REPETITION: 10, DELAY_MS: 5 })),
    );
    runs.forEach((s, i) => {
      expect(s.events.map((e) => e.SEQ)).toEqual([...Array(10).keys()]);
      expect(s.events.every((e) => e.TEXT === `s${i}`)).toBe(true);
    });
  }, 60_000);
});

describe('cancellation', () => {
  const cancelCount = async (model: string) => {
    const { json } = await httpJson(engine.httpPort, 'GET', `/v2/models/${model}/stats`);
    return Number(json.model_stats[0].inference_stats.cancel?.count ?? 0);
  };

  it('closing the HTTP stream reaches the model (abort signal) and counts a cancellation', async () => {
    const mark = path.join(os.tmpdir(), `l0-generate-cancel-${process.pid}`);
    removeDir(mark);
    const before = await cancelCount('js_stream');
    const body = JSON.stringify({ PROMPT: 'p', REPETITION: 1000, DELAY_MS: 20, CANCEL_MARK: mark });
    await new Promise<void>((resolve, reject) => {
      const req = http.request(url('js_stream', 'generate_stream'), { method: 'POST' }, (res) => {
        res.once('data', () => {
          req.destroy(); // the client goes away after the first event
          resolve();
        });
      });
      req.on('error', () => {});
      req.once('error', reject);
      req.end(body);
    });
    await expect.poll(() => existsSync(mark), { timeout: 5000 }).toBe(true);
    expect(Number(readFileSync(mark, 'utf8'))).toBeLessThan(1000);
    await expect.poll(() => cancelCount('js_stream'), { timeout: 5000 }).toBe(before + 1);
    removeDir(mark);
  });

  it('a queued request whose client leaves is dropped from the queue: it never runs', async () => {
    const stats = async () => (await httpJson(engine.httpPort, 'GET', '/v2/models/js_stream_one/stats')).json.model_stats[0];
    const before = await stats();
    const first = stream('js_stream_one', { PROMPT: 'a', REPETITION: 20, DELAY_MS: 25 }); // holds the one instance ~0.5 s
    await new Promise((r) => setTimeout(r, 100));
    await new Promise<void>((resolve) => {
      const req = http.request(url('js_stream_one', 'generate_stream'), { method: 'POST' });
      req.on('error', () => {});
      req.end(JSON.stringify({ PROMPT: 'b', REPETITION: 5 }));
      setTimeout(() => {
        req.destroy(); // gone while queued behind the first
        resolve();
      }, 150);
    });
    expect((await first).events.length).toBe(20);
    await expect
      .poll(async () => Number((await stats()).inference_stats.cancel?.count ?? 0), { timeout: 5000 })
      .toBe(Number(before.inference_stats.cancel?.count ?? 0) + 1);
    const after = await stats();
    expect(Number(after.execution_count) - Number(before.execution_count)).toBe(1); // only the first ran
  });

  it('cancelling a gRPC ModelStreamInfer reaches the model', async () => {
    const mark = path.join(os.tmpdir(), `l0-generate-grpc-cancel-${process.pid}`);
    removeDir(mark);
    const call = grpcClient.raw.ModelStreamInfer();
    call.on('error', () => {});
    const got = new Promise<void>((resolve) => call.once('data', () => resolve()));
    call.write({
      model_name: 'js_stream',
      inputs: [{ name: 'PROMPT', datatype: 'BYTES', shape: [1, 1] }],
      raw_input_contents: [encodeBytesTensor(['g'])],
      parameters: { REPETITION: { int64_param: 1000 }, DELAY_MS: { int64_param: 20 }, CANCEL_MARK: { string_param: mark } },
    });
    await got;
    call.cancel();
    await expect.poll(() => existsSync(mark), { timeout: 5000 }).toBe(true);
    expect(Number(readFileSync(mark, 'utf8'))).toBeLessThan(1000);
    removeDir(mark);
  });
});
