// sequence_id past uint64 (issue 21, item 8): Triton's correlation IDs are
// unsigned 64-bit integers or strings. A JSON 2^64 (or more, or a negative,
// fractional or boolean ID) is refused with a clear 400 over HTTP and
// INVALID_ARGUMENT over gRPC, where a double or bool parameter is the wrong
// type as in Triton; IDs up to the top of uint64 and strings still pass.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEngine } from '../../engine/server/server.ts';
import { TritonGrpcClient, type Parameters } from '../../client/grpc-client.ts';
import { f32Bytes, grpcError, httpJson, removeDir, startTestEngine, tempRepo } from './helpers.ts';

let engine: RunningEngine;
let repo: string;
let grpc: TritonGrpcClient;

beforeAll(async () => {
  repo = tempRepo('l0-seqid', ['js_echo']);
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
  const r = await fetch(`http://127.0.0.1:${engine.httpPort}/v2/models/js_echo/infer`, { method: 'POST', body, headers: { 'Content-Type': 'application/json' } });
  return { status: r.status, json: (await r.json()) as Record<string, any> };
}
const grpcInfer = (sequence_id: Parameters[string]) =>
  grpc.modelInfer({ model_name: 'js_echo', parameters: { sequence_id }, inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }], raw_input_contents: [f32Bytes([1])] });

describe('L0_sequence_id_range', () => {
  it('HTTP: 2^64 and past it, negative, fractional and boolean IDs are refused naming the parameter', async () => {
    for (const id of ['18446744073709551616', '18446744073709551617', '1e30', '-1', '1.5', 'true']) {
      const r = await inferWithId(id);
      expect([id, r.status], id).toEqual([id, 400]);
      expect(r.json.error).toMatch(/^request parameter 'sequence_id' must be an unsigned 64-bit integer \(below 2\^64\) or a string, got /);
    }
  });

  it('HTTP: IDs within uint64 and strings pass', async () => {
    for (const id of ['0', '7', '9007199254740993', '18446744073709549568', '"corr-1"']) {
      expect([id, (await inferWithId(id)).status]).toEqual([id, 200]);
    }
  });

  it("gRPC: a double or bool ID is the wrong type (Triton's text); negative int64 refused; uint64 and strings pass", async () => {
    expect(await grpcError(grpcInfer({ double_param: 1e30 }))).toEqual({
      code: 3, details: "invalid value type for 'sequence_id' parameter, expected int64_param, uint64_param or string_param.",
    });
    expect((await grpcError(grpcInfer({ bool_param: true }))).code).toBe(3);
    expect((await grpcError(grpcInfer({ int64_param: -1 }))).details).toContain("request parameter 'sequence_id' must be an unsigned 64-bit integer");
    expect((await grpcInfer({ uint64_param: 2 ** 63 })).model_name).toBe('js_echo');
    expect((await grpcInfer({ int64_param: 42 })).model_name).toBe('js_echo');
    expect((await grpcInfer({ string_param: 'corr-1' })).model_name).toBe('js_echo');
  });
});
