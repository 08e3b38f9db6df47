// sequence_id past uint64 (issue 21, item 8): Triton's correlation IDs are
// unsigned 64-bit integers or strings. A JSON 2^64 (or more, or a negative,
// fractional or boolean ID) is refused with a clear 400 over HTTP and
// INVALID_ARGUMENT over gRPC, where a double or bool parameter is the wrong
// type as in Triton; IDs up to the top of uint64 and strings still pass.
// The sequence batcher keys sequences by the exact ID (issue: ids past 2^53
// used to collide as JS numbers) over HTTP JSON, generate and gRPC, and a
// CORRID control gets the exact ID.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { TritonGrpcClient, type Parameters } from '../../client/grpc-client.ts';
import { jsAccumulatorConfig, JS_ACCUMULATOR_MODEL, writeAccumulator, writeModel } from '../fixtures/test-models.ts';
import { f32Bytes, grpcError, httpJson, removeDir, startTestEngine, tempRepo, toF32 } from './helpers.ts';

let engine: RunningEngine;
let repo: string;
let grpc: TritonGrpcClient;

beforeAll(async () => {
  repo = tempRepo('l0-seqid', ['js_echo']);
  // The JS accumulator with a TYPE_UINT64 CORRID control, echoed as CORRID_OUT.
  const u64Config = jsAccumulatorConfig('seq_u64', 'direct { }')
    .replace('CONTROL_SEQUENCE_CORRID data_type: TYPE_STRING', 'CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64')
    .replace('name: "CORRID_OUT", data_type: TYPE_STRING', 'name: "CORRID_OUT", data_type: TYPE_UINT64');
  writeModel(repo, 'seq_u64', u64Config, {
    'model.ts': JS_ACCUMULATOR_MODEL.replace("CORRID_OUT: { datatype: 'BYTES'", "CORRID_OUT: { datatype: 'UINT64'"),
  });
  writeAccumulator(repo, 'seq_str', 'js', 'direct { }');
  engine = await startTestEngine({ modelRepository: repo });
  grpc = new TritonGrpcClient(`127.0.0.1:${engine.grpcPort}`);
}, 60_000);
afterAll(async () => {
  grpc?.close();
  await engine?.stop();
  removeDir(repo);
});

/** POST the JSON text as written: JSON.stringify could not write 18446744073709551616 exactly. */
async function inferWithId(idJson: string): Promise<{ status: number; json: Record<string, any> }> {
  const body = `{"parameters":{"sequence_id":${idJson}},"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[1]}]}`;
  const r = await fetch(`http://127.0.0.1:${engine.httpPort}/v2/models/js_echo/infer`, {
    method: 'POST',
    body,
    headers: { 'Content-Type': 'application/json' },
  });
  return { status: r.status, json: (await r.json()) as Record<string, any> };
}
const grpcInfer = (sequence_id: Parameters[string]) =>
  grpc.modelInfer({
    model_name: 'js_echo',
    parameters: { sequence_id },
    inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }],
    raw_input_contents: [f32Bytes([1])],
  });

describe('L0_sequence_id_range', () => {
  it('HTTP: 2^64 and past it, negative, fractional and boolean IDs are refused naming the parameter', async () => {
    for (const id of ['18446744073709551616', '18446744073709551617', '1e30', '-1', '1.5', 'true']) {
      const r = await inferWithId(id);
      expect([id, r.status], id).toEqual([id, 400]);
      expect(r.json.error).toMatch(/^request parameter 'sequence_id' must be an unsigned 64-bit integer \(below 2\^64\) or a string, got /);
    }
  });

  it('HTTP: IDs within uint64 and strings pass', async () => {
    for (const id of ['0', '7', '9007199254740993', '18446744073709549568', '18446744073709551615', '"corr-1"']) {
      expect([id, (await inferWithId(id)).status]).toEqual([id, 200]);
    }
  });

  it("gRPC: a double or bool ID is the wrong type (Triton's text); negative int64 refused; uint64 and strings pass", async () => {
    expect(await grpcError(grpcInfer({ double_param: 1e30 }))).toEqual({
      code: 3,
      details: "invalid value type for 'sequence_id' parameter, expected int64_param, uint64_param or string_param.",
    });
    expect((await grpcError(grpcInfer({ bool_param: true }))).code).toBe(3);
    expect((await grpcError(grpcInfer({ int64_param: -1 }))).details).toContain(
      "request parameter 'sequence_id' must be an unsigned 64-bit integer",
    );
    expect((await grpcInfer({ uint64_param: 2 ** 63 })).model_name).toBe('js_echo');
    expect((await grpcInfer({ int64_param: 42 })).model_name).toBe('js_echo');
    expect((await grpcInfer({ string_param: 'corr-1' })).model_name).toBe('js_echo');
  });
});

// Two IDs equal as JS numbers (both round to 2^60), different as uint64.
const A = 2n ** 60n;
const B = 2n ** 60n + 1n;

/** One step of sequence `id` over HTTP: the JSON text written by hand so the ID is exact. */
async function httpStep(model: string, id: string, v: number, start: boolean, end: boolean): Promise<{ status: number; text: string }> {
  const body =
    `{"parameters":{"sequence_id":${id},"sequence_start":${start},"sequence_end":${end}},` +
    `"inputs":[{"name":"INPUT","datatype":"FP32","shape":[1,1],"data":[${v}]}],"outputs":[{"name":"OUTPUT"},{"name":"CORRID_OUT"}]}`;
  const r = await fetch(`http://127.0.0.1:${engine.httpPort}/v2/models/${model}/infer`, {
    method: 'POST',
    body,
    headers: { 'Content-Type': 'application/json' },
  });
  return { status: r.status, text: await r.text() };
}
const sumOf = (text: string) =>
  (JSON.parse(text) as { outputs: Array<{ name: string; data: number[] }> }).outputs.find((o) => o.name === 'OUTPUT')!.data[0];
/** CORRID_OUT's value as the reply's JSON text writes it (exact digits). */
const corridText = (text: string) => /"name":"CORRID_OUT".*?"data":\[([^\]]+)\]/.exec(text)?.[1];

async function grpcStep(
  model: string,
  id: bigint | string,
  v: number,
  start: boolean,
  end: boolean,
): Promise<{ sum: number; corrid: bigint | string }> {
  const r = await grpc.modelInfer({
    model_name: model,
    parameters: {
      sequence_id: typeof id === 'string' ? { string_param: id } : { uint64_param: id },
      sequence_start: { bool_param: start },
      sequence_end: { bool_param: end },
    },
    inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 1] }],
    raw_input_contents: [f32Bytes([v])],
  });
  const at = (n: string) => r.raw_output_contents![r.outputs!.findIndex((o) => o.name === n)]!;
  const c = at('CORRID_OUT');
  const corrid = typeof id === 'string' ? Buffer.from(c.subarray(4)).toString() : new BigUint64Array(Uint8Array.from(c).buffer)[0]!;
  return { sum: toF32(at('OUTPUT'))[0]!, corrid };
}

describe('L0_sequence_id_range: IDs past 2^53 stay exact', () => {
  it('HTTP: two sequences whose IDs differ only past 2^53 stay separate; CORRID gets the exact ID', async () => {
    expect(Number(A)).toBe(Number(B)); // the collision this guards against
    let a = await httpStep('seq_u64', String(A), 1, true, false);
    let b = await httpStep('seq_u64', String(B), 10, true, false);
    expect([a.status, b.status]).toEqual([200, 200]);
    a = await httpStep('seq_u64', String(A), 2, false, false);
    b = await httpStep('seq_u64', String(B), 20, false, true);
    expect([sumOf(a.text), sumOf(b.text)]).toEqual([3, 30]);
    expect([corridText(a.text), corridText(b.text)]).toEqual([String(A), String(B)]);
    a = await httpStep('seq_u64', String(A), 4, false, true);
    expect(sumOf(a.text)).toBe(7);
    // B ended: a non-START request for it is refused, naming the exact ID.
    b = await httpStep('seq_u64', String(B), 1, false, false);
    expect(b.status).toBe(400);
    expect(JSON.parse(b.text).error).toContain(`sequence ${B} `);
  });

  it('gRPC (uint64_param): the same, and an HTTP step joins the gRPC sequence of the same exact ID', async () => {
    const top = 2n ** 64n - 1n;
    expect((await grpcStep('seq_u64', A, 1, true, false)).sum).toBe(1);
    expect((await grpcStep('seq_u64', B, 100, true, false)).sum).toBe(100);
    expect((await grpcStep('seq_u64', top, 1000, true, false)).sum).toBe(1000);
    expect(await grpcStep('seq_u64', A, 2, false, false)).toEqual({ sum: 3, corrid: A });
    expect(await grpcStep('seq_u64', B, 200, false, true)).toEqual({ sum: 300, corrid: B });
    expect(await grpcStep('seq_u64', top, 2000, false, true)).toEqual({ sum: 3000, corrid: top });
    const h = await httpStep('seq_u64', String(A), 4, false, true);
    expect([h.status, sumOf(h.text), corridText(h.text)]).toEqual([200, 7, String(A)]);
  });

  it('generate: the ID as a top-level key past 2^53 stays exact', async () => {
    const gen = async (id: bigint, v: number, start: boolean, end: boolean) => {
      const body = `{"INPUT":${v},"sequence_id":${id},"sequence_start":${start},"sequence_end":${end}}`;
      const r = await fetch(`http://127.0.0.1:${engine.httpPort}/v2/models/seq_str/generate`, {
        method: 'POST',
        body,
        headers: { 'Content-Type': 'application/json' },
      });
      return { status: r.status, json: (await r.json()) as Record<string, unknown> };
    };
    await gen(A, 1, true, false);
    await gen(B, 10, true, false);
    const a = await gen(A, 2, false, true);
    const b = await gen(B, 20, false, true);
    expect([a.status, a.json.OUTPUT, a.json.CORRID_OUT]).toEqual([200, 3, String(A)]);
    expect([b.status, b.json.OUTPUT, b.json.CORRID_OUT]).toEqual([200, 30, String(B)]);
  });

  it('a string ID works; a string ID for a UINT64 CORRID, or a wrongly typed ID, errors naming it', async () => {
    expect((await grpcStep('seq_str', 'corr-x', 5, true, false)).sum).toBe(5);
    expect(await grpcStep('seq_str', 'corr-x', 6, false, true)).toEqual({ sum: 11, corrid: 'corr-x' });
    const s = await httpStep('seq_u64', '"corr-y"', 1, true, true);
    expect([s.status, JSON.parse(s.text).error]).toEqual([
      400,
      "sequence_id 'corr-y' is a string but the model's CONTROL_SEQUENCE_CORRID 'CORRID' is UINT64",
    ]);
    for (const bad of ['true', '1.5', '-3', '{"a":1}']) {
      const r = await httpStep('seq_u64', bad, 1, true, true);
      expect([bad, r.status]).toEqual([bad, 400]);
      expect(JSON.parse(r.text).error).toContain("'sequence_id'");
    }
    const g = await grpcError(
      grpc.modelInfer({
        model_name: 'seq_u64',
        parameters: { sequence_id: { double_param: 1.5 } },
        inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 1] }],
        raw_input_contents: [f32Bytes([1])],
      }),
    );
    expect([g.code, g.details]).toEqual([
      3,
      "invalid value type for 'sequence_id' parameter, expected int64_param, uint64_param or string_param.",
    ]);
  });
});
