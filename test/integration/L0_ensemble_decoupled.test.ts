// Ensembles whose first step is decoupled, on the real engine, after Triton's
// L0_backend_python `io` decoupled trial and its ensemble docs: each response
// of the decoupled step (a Python stub or a JS model) runs the next step once
// and reaches the client as its own response, in order, over ModelStreamInfer
// and generate_stream, the final flag last; the ensemble reports itself
// decoupled and unary infer refuses it with Triton's texts; a failed step
// fails the stream and stops the decoupled step; the client's cancel reaches
// the decoupled model; a step mixing two flows is refused at load.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { grpcError, httpJson, i32Bytes, toI32, type ProtoClient } from './helpers.ts';
import { pythonEngine, pythonRepo } from './python-support.ts';
import { MODELS as PY_MODELS } from './python-decoupled-models.ts';
import { DECOUPLED_GRPC_MESSAGE, DECOUPLED_HTTP_MESSAGE } from '../../engine/api/decoupled.ts';
import type { RunningEngine } from '../../engine/server/server.ts';

let repo: string;
let eng: RunningEngine;
let client: ProtoClient;

/** js_count (decoupled): N responses OUT = FROM + i, DELAY_MS apart; on abort writes the count sent to <model dir>/cancelled. */
const JS_COUNT = (markDir: string) => `import { writeFileSync } from 'node:fs';
type T = { data: Uint8Array };
type Sig = { aborted: boolean; addEventListener(t: 'abort', f: () => void): void };
type Req = { inputs: Record<string, T>; signal: Sig; send: (r: unknown) => void };
const i32 = (t: T) => new Int32Array(Uint8Array.from(t.data).buffer)[0]!;
export async function execute(requests: Req[]) {
  await Promise.all(requests.map(async (r) => {
    const n = i32(r.inputs.N!), from = i32(r.inputs.FROM!), delay = i32(r.inputs.DELAY_MS!);
    let sent = 0;
    r.signal.addEventListener('abort', () => writeFileSync(${JSON.stringify(path.join(markDir, 'cancelled'))}, String(sent)));
    for (let i = 0; i < n && !r.signal.aborted; i++) {
      if (delay > 0) await new Promise((res) => setTimeout(res, delay));
      if (r.signal.aborted) break;
      r.send({ outputs: { OUT: { datatype: 'INT32', shape: [1], data: new Uint8Array(Int32Array.of(from + i).buffer) } } });
      sent++;
    }
  }));
}
`;

/** js_scale (plain, 4 instances): Y = 10 X, after (3 - X % 4) * 15 ms so that later values finish first; X = 77 fails. */
const JS_SCALE = `type T = { data: Uint8Array };
export async function execute(requests: Array<{ inputs: Record<string, T> }>) {
  const x = new Int32Array(Uint8Array.from(requests[0]!.inputs.X!.data).buffer)[0]!;
  await new Promise((res) => setTimeout(res, (3 - (x % 4)) * 15));
  if (x === 77) throw new Error('js_scale refuses 77');
  return [{ outputs: { Y: { datatype: 'INT32', shape: [1], data: new Uint8Array(Int32Array.of(10 * x).buffer) } } }];
}
`;

const io = (ins: string[], outs: string[]) =>
  `input [ ${ins.map((n) => `{ name: "${n}", data_type: TYPE_INT32, dims: [ 1 ] }`).join(', ')} ]\n` +
  `output [ ${outs.map((n) => `{ name: "${n}", data_type: TYPE_INT32, dims: [ 1 ] }`).join(', ')} ]\n`;

/** An ensemble: `first` (inputs mapped by name) writes OUT to the tensor FLOW, js_scale turns FLOW into RESULT. */
const ensemble = (name: string, first: string, ins: string[], firstInputs = ins) => `name: "${name}"
platform: "ensemble"
max_batch_size: 0
${io(ins, ['RESULT'])}ensemble_scheduling { step [
  { model_name: "${first}" model_version: -1 ${firstInputs.map((n) => `input_map { key: "${n}" value: "${n}" }`).join(' ')} output_map { key: "OUT" value: "FLOW" } },
  { model_name: "js_scale" model_version: -1 input_map { key: "X" value: "FLOW" } output_map { key: "Y" value: "RESULT" } }
] }
`;

/** Step 2 takes the ensemble's input IN and the decoupled step's FLOW: two flows meet (Triton refuses it). */
const MIXED = `name: "ens_mixed"
platform: "ensemble"
max_batch_size: 0
${io(['IN'], ['RESULT'])}ensemble_scheduling { step [
  { model_name: "async_tasks" model_version: -1 input_map { key: "IN" value: "IN" } output_map { key: "OUT" value: "FLOW" } },
  { model_name: "js_add" model_version: -1 input_map { key: "A" value: "IN" } input_map { key: "B" value: "FLOW" } output_map { key: "S" value: "RESULT" } }
] }
`;

function write(name: string, config: string, file?: { name: string; text: string }): void {
  mkdirSync(path.join(repo, name, '1'), { recursive: true });
  writeFileSync(path.join(repo, name, 'config.pbtxt'), config);
  if (file) writeFileSync(path.join(repo, name, '1', file.name), file.text);
}

pythonEngine(
  () => {
    repo = pythonRepo('l0-ens-decoupled', [], { async_tasks: PY_MODELS.async_tasks!, cancel_watch: PY_MODELS.cancel_watch! });
    const js = (name: string, extra: string) =>
      `name: "${name}"\nbackend: "js"\ndefault_model_filename: "model.ts"\nmax_batch_size: 0\n${extra}`;
    write('js_count', js('js_count', `model_transaction_policy { decoupled: true }\n${io(['N', 'FROM', 'DELAY_MS'], ['OUT'])}`), {
      name: 'model.ts',
      text: JS_COUNT(path.join(repo, 'js_count')),
    });
    write('js_scale', js('js_scale', `instance_group [ { count: 4, kind: KIND_CPU } ]\n${io(['X'], ['Y'])}`), {
      name: 'model.ts',
      text: JS_SCALE,
    });
    write('js_add', js('js_add', io(['A', 'B'], ['S'])), { name: 'model.ts', text: 'export function execute() { return []; }\n' });
    write('ens_js', ensemble('ens_js', 'js_count', ['N', 'FROM', 'DELAY_MS']));
    write('ens_py', ensemble('ens_py', 'async_tasks', ['IN']));
    write('ens_py_cancel', ensemble('ens_py_cancel', 'cancel_watch', ['IN']));
    write('ens_plain', ensemble('ens_plain', 'js_scale', ['X']).replace('key: "OUT" value: "FLOW"', 'key: "Y" value: "FLOW"'));
    write('ens_mixed', MIXED);
    return repo;
  },
  (s) => ({ repo, eng, client } = s),
  {
    controlMode: 'explicit',
    loadModels: ['async_tasks', 'cancel_watch', 'js_count', 'js_scale', 'js_add', 'ens_js', 'ens_py', 'ens_py_cancel', 'ens_plain'],
  },
);

type StreamMsg = {
  error_message: string;
  infer_response: { id: string; raw_output_contents: Buffer[]; parameters?: Record<string, { bool_param?: boolean }> };
};
type Got = { value?: number; error?: string; final: boolean; empty: boolean };

const tensors = (values: Record<string, number>) => ({
  inputs: Object.keys(values).map((name) => ({ name, datatype: 'INT32', shape: [1] })),
  raw_input_contents: Object.values(values).map((v) => i32Bytes([v])),
});

/** One ModelStreamInfer request asking for the empty final response; every message until the stream ends. */
function streamInfer(
  model: string,
  values: Record<string, number>,
  onMsg?: (g: Got, call: grpc.ClientDuplexStream<unknown, StreamMsg>) => void,
): Promise<Got[]> {
  const got: Got[] = [];
  return new Promise((resolve, reject) => {
    const call = client.raw.ModelStreamInfer() as grpc.ClientDuplexStream<unknown, StreamMsg>;
    call.on('data', (m: StreamMsg) => {
      const raw = m.infer_response.raw_output_contents?.[0];
      const g: Got = {
        final: m.infer_response.parameters?.triton_final_response?.bool_param === true,
        empty: !raw,
        ...(m.error_message ? { error: m.error_message } : raw ? { value: toI32(raw)[0] } : {}),
      };
      got.push(g);
      onMsg?.(g, call);
    });
    call.on('error', (e: grpc.ServiceError) => (e.code === grpc.status.CANCELLED ? resolve(got) : reject(e)));
    call.on('end', () => resolve(got));
    call.write({
      model_name: model,
      id: 'r1',
      ...tensors(values),
      parameters: { triton_enable_empty_final_response: { bool_param: true } },
    });
    call.end();
  });
}

/** Values of the data messages; checks that exactly the last message carries the final flag. */
function valuesWithFinalLast(got: Got[]): number[] {
  expect(got.length).toBeGreaterThan(0);
  expect(got.map((g) => g.final)).toEqual(got.map((_, i) => i === got.length - 1));
  return got.filter((g) => !g.empty).map((g) => g.value!);
}

async function until(cond: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end && !cond()) await new Promise((r) => setTimeout(r, 25));
  return cond();
}

describe('L0_ensemble_decoupled', () => {
  it('a decoupled Python step: N responses in, N transformed responses out over ModelStreamInfer, in order, the final flag last', async () => {
    for (const n of [5, 1]) {
      const got = await streamInfer('ens_py', { IN: n });
      expect(got.some((g) => g.error)).toBe(false);
      expect(valuesWithFinalLast(got)).toEqual(Array.from({ length: n }, (_, i) => 10 * i));
    }
    // No response from the decoupled step: only the final flag.
    const none = await streamInfer('ens_py', { IN: 0 });
    expect(none).toEqual([{ final: true, empty: true }]);
  }, 30_000);

  it('a decoupled JS step: responses stay in order though the second step finishes later values first', async () => {
    const got = await streamInfer('ens_js', { N: 12, FROM: 1, DELAY_MS: 0 });
    expect(got.some((g) => g.error)).toBe(false);
    expect(valuesWithFinalLast(got)).toEqual(Array.from({ length: 12 }, (_, i) => 10 * (1 + i)));
  }, 30_000);

  it('generate_stream: one event per response of the decoupled step, in order (JS and Python)', async () => {
    for (const [model, body, want] of [
      ['ens_js', { N: 4, FROM: 3, DELAY_MS: 5 }, [30, 40, 50, 60]],
      ['ens_py', { IN: 3 }, [0, 10, 20]],
    ] as const) {
      const r = await fetch(`http://127.0.0.1:${eng.httpPort}/v2/models/${model}/generate_stream`, {
        method: 'POST',
        body: JSON.stringify(body),
      });
      expect(r.status).toBe(200);
      const events = (await r.text())
        .split('\n\n')
        .filter(Boolean)
        .map((e) => JSON.parse(e.slice('data: '.length)) as { RESULT: number });
      expect(events.map((e) => e.RESULT)).toEqual(want);
    }
  }, 30_000);

  it("the ensemble reports itself decoupled; unary infer answers Triton's decoupled errors; a plain ensemble stays unary", async () => {
    const cfg = await httpJson(eng.httpPort, 'GET', '/v2/models/ens_py/config');
    expect(cfg.json.model_transaction_policy).toEqual({ decoupled: true });
    const plain = await httpJson(eng.httpPort, 'GET', '/v2/models/ens_plain/config');
    expect(plain.json.model_transaction_policy?.decoupled ?? false).toBe(false);
    const e = await grpcError(client.call('ModelInfer', { model_name: 'ens_py', ...tensors({ IN: 2 }) }));
    expect(e.details).toBe(DECOUPLED_GRPC_MESSAGE);
    const h = await httpJson(eng.httpPort, 'POST', '/v2/models/ens_py/infer', {
      inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: [2] }],
    });
    expect(h.json.error).toBe(DECOUPLED_HTTP_MESSAGE);
    const ok = await client.call('ModelInfer', { model_name: 'ens_plain', ...tensors({ X: 4 }) });
    expect(toI32(ok.raw_output_contents[0])[0]).toBe(400);
  }, 30_000);

  it('a failed second step fails the stream with the ensemble prefix and stops the decoupled step', async () => {
    const mark = path.join(repo, 'js_count', 'cancelled');
    rmSync(mark, { force: true });
    const got = await streamInfer('ens_js', { N: 40, FROM: 75, DELAY_MS: 20 });
    const err = got.find((g) => g.error);
    expect(err?.error).toContain("in ensemble 'ens_js', ");
    expect(err?.error).toContain('js_scale refuses 77');
    // What came before the error is a prefix of the stream; nothing follows it.
    expect(got.slice(0, got.indexOf(err!)).map((g) => g.value)).toEqual([750, 760].slice(0, got.indexOf(err!)));
    expect(got.at(-1)).toBe(err);
    expect(await until(() => existsSync(mark), 5000)).toBe(true);
    expect(Number(readFileSync(mark, 'utf8'))).toBeLessThan(40);
  }, 30_000);

  it('cancelling the stream mid-way reaches the decoupled Python step (request.is_cancelled())', async () => {
    const marker = path.join(repo, 'cancel_watch', 'cancelled-r1');
    const got = await streamInfer('ens_py_cancel', { IN: 0 }, (g, call) => {
      if (g.value === 10) call.cancel();
    });
    expect(got[0]).toMatchObject({ value: 10 });
    expect(await until(() => existsSync(marker), 5000)).toBe(true);
  }, 30_000);

  it('closing generate_stream mid-way reaches the decoupled JS step (its abort signal)', async () => {
    const mark = path.join(repo, 'js_count', 'cancelled');
    writeFileSync(mark, '');
    const ac = new AbortController();
    const r = await fetch(`http://127.0.0.1:${eng.httpPort}/v2/models/ens_js/generate_stream`, {
      method: 'POST',
      body: JSON.stringify({ N: 200, FROM: 0, DELAY_MS: 20 }),
      signal: ac.signal,
    });
    const reader = r.body!.getReader();
    let text = '';
    while (!text.includes('"RESULT":20')) text += new TextDecoder().decode((await reader.read()).value);
    ac.abort();
    expect(await until(() => readFileSync(mark, 'utf8') !== '', 5000)).toBe(true);
    expect(Number(readFileSync(mark, 'utf8'))).toBeLessThan(200);
  }, 30_000);

  it('a step taking the ensemble input and a decoupled output is refused at load, as Triton does', async () => {
    const r = await httpJson(eng.httpPort, 'POST', '/v2/repository/models/ens_mixed/load');
    expect(r.status).toBe(400);
    expect(r.json.error).toContain("step[1] (model 'js_add') receives inputs originated from different decoupled models");
  }, 30_000);
});
