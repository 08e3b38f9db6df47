// The sequence batcher on the real engine (after Triton's L0_sequence_batcher):
// accumulator models as ONNX (implicit state, START control) and JS (all four
// controls, string CORRID), direct and oldest strategies, interleaved
// sequences over gRPC and HTTP, a whole sequence on one ModelStreamInfer
// stream, backlog when every slot is taken, restart, idle release and the
// missing-ID error.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { writeAccumulator } from '../fixtures/test-models.ts';
import {
  decodeBytesTensor,
  f32Bytes,
  grpcError,
  httpJson,
  protoLoaderClient,
  removeDir,
  startTestEngine,
  tempRepo,
  toF32,
  toI32,
  type ProtoClient,
} from './helpers.ts';

const GRPC_INVALID_ARG = 3;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
type Id = number | string;

describe('L0_sequence_batcher', () => {
  let engine: RunningEngine;
  let repo: string;
  let client: ProtoClient;

  beforeAll(async () => {
    repo = tempRepo('l0-sequence');
    writeAccumulator(repo, 'seq_onnx_direct', 'onnx', 'direct { }');
    writeAccumulator(
      repo,
      'seq_onnx_oldest',
      'onnx',
      'oldest { max_candidate_sequences: 4 preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 50000 }',
    );
    writeAccumulator(repo, 'seq_js_direct', 'js', 'direct { }');
    writeAccumulator(repo, 'seq_js_oldest', 'js', 'oldest { max_candidate_sequences: 8 max_queue_delay_microseconds: 30000 }');
    writeAccumulator(repo, 'seq_js_idle', 'js', 'direct { }', 'max_sequence_idle_microseconds: 300000');
    engine = await startTestEngine({ modelRepository: repo });
    client = protoLoaderClient(engine.grpcPort);
  });

  afterAll(async () => {
    client?.close();
    await engine?.stop();
    removeDir(repo);
  });

  const grpcParams = (id: Id | undefined, start: boolean, end: boolean, extra: Record<string, unknown> = {}) => ({
    ...(id === undefined ? {} : { sequence_id: typeof id === 'string' ? { string_param: id } : { int64_param: id } }),
    sequence_start: { bool_param: start },
    sequence_end: { bool_param: end },
    ...extra,
  });
  const grpcReq = (model: string, id: Id | undefined, v: number, start = false, end = false, extra: Record<string, unknown> = {}) => ({
    model_name: model,
    inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 1] }],
    raw_input_contents: [f32Bytes([v])],
    parameters: grpcParams(id, start, end, extra),
  });
  const grpcStep = async (
    model: string,
    id: Id | undefined,
    v: number,
    start = false,
    end = false,
    extra: Record<string, unknown> = {},
  ) => {
    const r = await client.call('ModelInfer', grpcReq(model, id, v, start, end, extra));
    const out = r.outputs.findIndex((o: { name: string }) => o.name === 'OUTPUT');
    return { sum: toF32(r.raw_output_contents[out])[0]!, res: r };
  };
  const httpStep = async (model: string, id: Id, v: number, start = false, end = false) => {
    const r = await httpJson(engine.httpPort, 'POST', `/v2/models/${model}/infer`, {
      parameters: { sequence_id: id, sequence_start: start, sequence_end: end },
      inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 1], data: [v] }],
      outputs: [{ name: 'OUTPUT' }],
    });
    if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${r.json.error}`);
    return r.json.outputs[0].data[0] as number;
  };

  /** Three sequences, stepped together; each step's requests are in flight at once. Returns each sequence's sums. */
  async function interleaved(step: (id: Id, v: number, start: boolean, end: boolean) => Promise<number>, ids: Id[]): Promise<number[][]> {
    const values = ids.map((_, s) => [1, 2, 3, 4].map((v) => v * 10 ** s));
    const sums: number[][] = ids.map(() => []);
    for (let k = 0; k < 4; k++) {
      const out = await Promise.all(ids.map((id, s) => step(id, values[s]![k]!, k === 0, k === 3)));
      out.forEach((x, s) => sums[s]!.push(x));
    }
    return sums;
  }
  const expected = (n: number) => Array.from({ length: n }, (_, s) => [1, 3, 6, 10].map((v) => v * 10 ** s));

  it('runs interleaved sequences with implicit state over gRPC, both strategies, ONNX and JS', async () => {
    for (const model of ['seq_onnx_direct', 'seq_onnx_oldest', 'seq_js_direct', 'seq_js_oldest']) {
      const sums = await interleaved(async (id, v, s, e) => (await grpcStep(model, id, v, s, e)).sum, [101, 102, 103]);
      expect(sums, model).toEqual(expected(3));
    }
  });

  it('runs interleaved sequences over HTTP with string and numeric IDs', async () => {
    expect(await interleaved((id, v, s, e) => httpStep('seq_onnx_oldest', id, v, s, e), ['alpha', 7, 'beta'])).toEqual(expected(3));
    expect(await interleaved((id, v, s, e) => httpStep('seq_js_direct', id, v, s, e), ['alpha', 7, '7'])).toEqual(expected(3));
  });

  it('the oldest strategy batches requests of different sequences together', async () => {
    const before = engine.server.modelStatistics('seq_onnx_oldest')[0]!;
    const big = (b: typeof before) => b.batch_stats.filter((x) => x.batch_size > 1).reduce((n, x) => n + x.compute_infer.count, 0);
    await interleaved(async (id, v, s, e) => (await grpcStep('seq_onnx_oldest', id, v, s, e)).sum, [201, 202, 203, 204]);
    const after = engine.server.modelStatistics('seq_onnx_oldest')[0]!;
    expect(big(after)).toBeGreaterThan(big(before));
    expect(after.inference_stats.success.count - before.inference_stats.success.count).toBe(16);
  });

  it('gives the JS model its controls: START/END/READY flags and a string CORRID', async () => {
    const first = await grpcStep('seq_js_direct', 'user-42', 5, true, false);
    const last = await grpcStep('seq_js_direct', 'user-42', 1, false, true);
    const out = (r: any, name: string) => r.raw_output_contents[r.outputs.findIndex((o: { name: string }) => o.name === name)];
    expect([...toI32(out(first.res, 'FLAGS'))]).toEqual([1, 0, 1]);
    expect([...toI32(out(last.res, 'FLAGS'))]).toEqual([0, 1, 1]);
    expect(decodeBytesTensor(out(last.res, 'CORRID_OUT')).map(String)).toEqual(['user-42']);
    expect(last.sum).toBe(6);
    // The state output stays inside the engine.
    expect(last.res.outputs.map((o: { name: string }) => o.name)).not.toContain('STATE_OUT');
  });

  it('sends a whole sequence on one ModelStreamInfer stream', async () => {
    const stream = client.raw.ModelStreamInfer();
    const replies: any[] = [];
    const done = new Promise<void>((resolve, reject) => {
      stream.on('data', (m: any) => replies.push(m));
      stream.on('end', resolve);
      stream.on('error', reject);
    });
    const vals = [3, 4, 5, 6, 7];
    vals.forEach((v, i) => stream.write({ ...grpcReq('seq_onnx_direct', 'stream-1', v, i === 0, i === vals.length - 1), id: `r${i}` }));
    stream.end();
    await done;
    expect(replies.map((r) => r.error_message)).toEqual(vals.map(() => ''));
    expect(replies.map((r) => [r.infer_response.id, toF32(r.infer_response.raw_output_contents[0])[0]])).toEqual([
      ['r0', 3],
      ['r1', 7],
      ['r2', 12],
      ['r3', 18],
      ['r4', 25],
    ]);
  });

  it('a new START on a live sequence restarts it', async () => {
    expect((await grpcStep('seq_onnx_direct', 55, 5, true)).sum).toBe(5);
    expect((await grpcStep('seq_onnx_direct', 55, 3)).sum).toBe(8);
    expect((await grpcStep('seq_onnx_direct', 55, 2, true)).sum).toBe(2);
    expect((await grpcStep('seq_onnx_direct', 55, 1, false, true)).sum).toBe(3);
  });

  it('direct: a sequence beyond the free slots waits in the backlog until one ends', async () => {
    // seq_onnx_direct: one instance, max_batch_size 4 -> four slots.
    for (const id of [301, 302, 303, 304]) await grpcStep('seq_onnx_direct', id, 1, true);
    let fifthDone = false;
    const fifth = grpcStep('seq_onnx_direct', 305, 9, true, true).then((r) => ((fifthDone = true), r));
    await sleep(300);
    expect(fifthDone).toBe(false);
    expect((await grpcStep('seq_onnx_direct', 301, 1, false, true)).sum).toBe(2);
    expect((await fifth).sum).toBe(9);
    for (const id of [302, 303, 304]) await grpcStep('seq_onnx_direct', id, 0, false, true);
  });

  it("refuses a request without a correlation ID, and one that did not START, with Triton's messages", async () => {
    const none = await grpcError(client.call('ModelInfer', grpcReq('seq_onnx_direct', undefined, 1, true)));
    expect([none.code, none.details]).toEqual([
      GRPC_INVALID_ARG,
      "inference request to model 'seq_onnx_direct' must specify a non-zero or non-empty correlation ID",
    ]);
    const zero = await httpJson(engine.httpPort, 'POST', '/v2/models/seq_onnx_direct/infer', {
      parameters: { sequence_id: 0, sequence_start: true },
      inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 1], data: [1] }],
    });
    expect([zero.status, zero.json.error]).toEqual([
      400,
      "inference request to model 'seq_onnx_direct' must specify a non-zero or non-empty correlation ID",
    ]);
    const noStart = await grpcError(client.call('ModelInfer', grpcReq('seq_onnx_direct', 999, 1)));
    expect(noStart.details).toBe(
      "inference request for sequence 999 to model 'seq_onnx_direct' must specify the START flag on the first request of the sequence",
    );
  });

  it('releases a sequence idle past max_sequence_idle_microseconds; its next request is an error saying so', async () => {
    expect((await grpcStep('seq_js_idle', 'idle-1', 2, true)).sum).toBe(2);
    expect((await grpcStep('seq_js_idle', 'idle-2', 2, true)).sum).toBe(2);
    await sleep(150);
    expect((await grpcStep('seq_js_idle', 'idle-2', 1)).sum).toBe(3); // kept alive
    await sleep(250);
    const err = await grpcError(client.call('ModelInfer', grpcReq('seq_js_idle', 'idle-1', 1)));
    expect(err.details).toMatch(/sequence idle-1 .* must specify the START flag .*released after max_sequence_idle_microseconds/);
    expect((await grpcStep('seq_js_idle', 'idle-2', 1, false, true)).sum).toBe(4);
  });

  it('counts sequence models in statistics and metrics like the others', async () => {
    const s = engine.server.modelStatistics('seq_js_oldest')[0]!;
    expect(s.inference_stats.success.count).toBe(12);
    expect(s.inference_stats.queue.count).toBe(12);
    expect(s.inference_count).toBe(12);
    const text = await (await fetch(`http://127.0.0.1:${engine.metricsPort}/metrics`)).text();
    expect(text).toMatch(/nv_inference_request_success\{model="seq_js_oldest",version="1"\} 12/);
  });
});
