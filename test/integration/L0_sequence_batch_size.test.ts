// The sequence batcher refuses a statically batched request (batch size > 1)
// with Triton's words (qa/L0_sequence_batcher, core sequence_batch_scheduler),
// over HTTP and gRPC, and the sequence it named is unharmed: batch size 1
// requests of it still accumulate.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { writeAccumulator } from '../fixtures/test-models.ts';
import { f32Bytes, grpcError, httpJson, protoLoaderClient, removeDir, startTestEngine, tempRepo, type ProtoClient } from './helpers.ts';

const TEXT = (m: string) => `inference request to model '${m}' must specify batch-size 1 due to requirements of sequence batcher`;

describe('L0_sequence_batch_size', () => {
  let engine: RunningEngine;
  let repo: string;
  let client: ProtoClient;

  beforeAll(async () => {
    repo = tempRepo('l0-sequence-bs');
    writeAccumulator(repo, 'seq_onnx', 'onnx', 'direct { }');
    writeAccumulator(repo, 'seq_js', 'js', 'oldest { max_candidate_sequences: 4 }');
    engine = await startTestEngine({ modelRepository: repo });
    client = protoLoaderClient(engine.grpcPort);
  });

  afterAll(async () => {
    client?.close();
    await engine?.stop();
    removeDir(repo);
  });

  const http = (model: string, id: number, rows: number[], start: boolean) =>
    httpJson(engine.httpPort, 'POST', `/v2/models/${model}/infer`, {
      parameters: { sequence_id: id, sequence_start: start, sequence_end: false },
      inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [rows.length, 1], data: rows }],
      outputs: [{ name: 'OUTPUT' }],
    });

  it("HTTP: batch size 2 is INVALID_ARG (400) with Triton's text, for both strategies", async () => {
    for (const model of ['seq_onnx', 'seq_js']) {
      const r = await http(model, 7, [1, 2], true);
      expect([r.status, r.json.error]).toEqual([400, TEXT(model)]);
    }
  });

  it('gRPC: batch size 3 is INVALID_ARGUMENT with the same text; batch size 1 steps still accumulate', async () => {
    const e = await grpcError(
      client.call('ModelInfer', {
        model_name: 'seq_onnx',
        inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [3, 1] }],
        raw_input_contents: [f32Bytes([1, 2, 3])],
        parameters: { sequence_id: { int64_param: 9 }, sequence_start: { bool_param: true } },
      }),
    );
    expect([e.code, e.details]).toEqual([3, TEXT('seq_onnx')]);
    expect((await http('seq_onnx', 9, [5], true)).json.outputs[0].data).toEqual([5]);
    expect((await http('seq_onnx', 9, [2], false)).json.outputs[0].data).toEqual([7]);
  });
});
